"""The settings file and the environment: what a user sees for each mistake, which value wins,
paths, secrets, and ``check_config`` over settings and rules together."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher.checks import check_config, load_config
from watcher.config.reading import load_settings
from watcher.config.settings import Settings
from watcher.core.errors import ConfigError
from watcher.kinds.rule_files import load_rules

from support.settings_files import (
    KEY,
    MINIMAL,
    RULE,
    TREASURY,
    load,
    problems,
    settings_file,
    write,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder ``conf/`` (seen as such from the working folder) holding ``rules/a.yaml``."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "conf"
    (folder / "rules").mkdir(parents=True)
    write(folder / "rules" / "a.yaml", RULE)
    return folder


# -- values and defaults ---------------------------------------------------------------------


def test_minimal_file_gets_the_defaults(conf: Path) -> None:
    settings = load(settings_file(conf))
    assert settings.rpc_url is not None
    assert settings.rpc_url.get_secret_value() == f"https://rpc.example.com/v3/{KEY}"
    assert settings.commitment == "finalized"
    assert settings.state_path == conf / "state" / "watcher.db"
    assert settings.rules == [conf / "rules"]
    assert settings.channels == {
        "ops": ["json://127.0.0.1:8080/"],
        "oncall": ["json://127.0.0.1:8081/"],
    }
    assert (settings.labels, settings.default_channels, settings.routes) == ({}, (), {})
    assert settings.fallback_channels == ()
    assert (settings.log_level, settings.log_format) == ("info", "auto")
    assert (settings.rpc.timeout, settings.rpc.max_attempts, settings.rpc.max_concurrency) == (
        10,
        5,
        8,
    )
    delivery = settings.delivery
    assert (delivery.first_retry, delivery.max_backoff, delivery.deadline) == (2, 300, 86400)
    assert settings.explorer_url == "https://explorer.solana.com/{kind}/{id}"
    assert settings.http is None
    assert settings.retention == 90 * 86400
    assert settings.config_path == conf / "watcher.yaml"


def test_every_key_is_read(conf: Path) -> None:
    settings = load(
        settings_file(
            conf,
            MINIMAL
            + f"""
commitment: confirmed
state_path: /var/lib/watcher/w.db
labels:
  {TREASURY}: treasury
log_level: DEBUG
log_format: json
rpc: {{timeout: 2s, max_attempts: 3, max_concurrency: 16}}
delivery: {{first_retry: 500ms, max_backoff: 1m, deadline: 2h}}
default_channels: [ops]
routes: {{critical: [oncall, ops]}}
fallback_channels: [oncall]
explorer_url: "https://solscan.io/{{kind}}/{{id}}"
http: {{listen: "[::1]:9102"}}
""",
        )
    )
    assert settings.commitment == "confirmed"
    assert settings.state_path == Path("/var/lib/watcher/w.db")
    assert settings.labels == {TREASURY: "treasury"}
    assert (settings.log_level, settings.log_format) == ("debug", "json")
    assert (settings.rpc.timeout, settings.rpc.max_attempts, settings.rpc.max_concurrency) == (
        2,
        3,
        16,
    )
    delivery = settings.delivery
    assert (delivery.first_retry, delivery.max_backoff, delivery.deadline) == (0.5, 60, 7200)
    assert settings.default_channels == ("ops",)
    assert settings.routes == {"critical": ("oncall", "ops")}
    assert settings.fallback_channels == ("oncall",)
    assert settings.explorer_url == "https://solscan.io/{kind}/{id}"
    assert settings.http is not None
    assert (settings.http.host, settings.http.port) == ("::1", 9102)


# -- the environment -------------------------------------------------------------------------


def test_environment_wins_over_the_file_key_by_key(conf: Path) -> None:
    path = settings_file(conf, MINIMAL + "commitment: finalized\nrpc: {max_attempts: 3}\n")
    settings = load(
        path,
        {
            "RPC_API_KEY": KEY,
            "WATCHER_COMMITMENT": "confirmed",
            "WATCHER_CHANNELS__OPS": '["json://x"]',
            "WATCHER_RPC__TIMEOUT": "20s",
            "WATCHER_HTTP__LISTEN": "127.0.0.1:9102",
            "WATCHER_DEFAULT_CHANNELS": '["oncall"]',
            "WATCHER_CONFIG": "/not/a/settings/key",  # the CLI's variable, not a setting
        },
    )
    assert settings.commitment == "confirmed"
    assert settings.channels == {"ops": ["json://x"], "oncall": ["json://127.0.0.1:8081/"]}
    assert (settings.rpc.timeout, settings.rpc.max_attempts) == (20, 3)
    assert settings.http is not None and settings.http.port == 9102
    assert settings.default_channels == ("oncall",)


def test_every_key_can_come_from_the_environment_alone(conf: Path) -> None:
    path = settings_file(conf, "log_format: console\n")
    settings = load(
        path,
        {
            "WATCHER_RPC_URL": "http://127.0.0.1:8899/v3/key",
            "WATCHER_RULES": '["rules"]',
            "WATCHER_STATE_PATH": "db/w.db",
            "WATCHER_CHANNELS": '{"ops": ["json://x"]}',
        },
    )
    assert settings.rpc_url is not None
    assert settings.rpc_url.get_secret_value() == "http://127.0.0.1:8899/v3/key"
    # relative paths from the environment resolve against the settings file's folder too
    assert (settings.rules, settings.state_path) == ([conf / "rules"], conf / "db" / "w.db")
    assert settings.log_format == "console"


def test_problems_in_the_environment_name_the_variable(conf: Path) -> None:
    path = settings_file(conf)
    env = {
        "RPC_API_KEY": KEY,
        "WATCHER_COMMITMENT": "fast",
        "WATCHER_RPC__MAX_ATTEMPTS": "many",
        "WATCHER_RPC__TIMOUT": "1s",
        "WATCHER_DELIVERY__DEADLINE": "24",
    }
    assert problems(path, env) == [
        "$WATCHER_COMMITMENT: commitment: expected 'finalized' or 'confirmed', got 'fast'",
        "$WATCHER_RPC__MAX_ATTEMPTS: rpc.max_attempts: expected a whole number, got 'many'",
        "$WATCHER_RPC__TIMOUT: rpc: unknown key 'timout' (did you mean 'timeout'?)",
        "$WATCHER_DELIVERY__DEADLINE: delivery.deadline: '24' has no unit: write e.g. 24s or 24m",
    ]


def test_a_list_from_the_environment_must_be_json(conf: Path) -> None:
    path = settings_file(conf)
    assert problems(path, {"RPC_API_KEY": KEY, "WATCHER_RULES": "rules/"}) == [
        "$WATCHER_RULES: rules: not valid JSON (lists and mappings from the environment are JSON)"
    ]


# -- ${VAR} ----------------------------------------------------------------------------------


def test_variables_are_expanded_in_string_values(conf: Path) -> None:
    path = settings_file(
        conf,
        MINIMAL.replace("json://127.0.0.1:8080/", "json://${HOOK_HOST}:${HOOK_PORT}/$${LITERAL}")
        + "state_path: ${STATE_DIR}/w.db\n",
    )
    env = {"RPC_API_KEY": KEY, "HOOK_HOST": "10.0.0.1", "HOOK_PORT": "80", "STATE_DIR": "/data"}
    settings = load(path, env)
    assert settings.channels["ops"] == ["json://10.0.0.1:80/${LITERAL}"]
    assert settings.state_path == Path("/data/w.db")
    # values from the environment are taken as they are
    from_env = load(path, {**env, "WATCHER_STATE_PATH": "/${HOOK_HOST}/w.db"})
    assert from_env.state_path == Path("/${HOOK_HOST}/w.db")


def test_a_missing_variable_names_the_line_and_the_variable(conf: Path) -> None:
    path = settings_file(conf, MINIMAL.replace("8081/", "8081/${HOOK_TOKEN}"))
    assert problems(path) == [
        "conf/watcher.yaml:1: rpc_url: environment variable RPC_API_KEY is not set",
        "conf/watcher.yaml:5: channels.oncall[0]: environment variable HOOK_TOKEN is not set",
    ]
    with pytest.raises(ConfigError):
        load_settings(path, {})


# -- secrets ---------------------------------------------------------------------------------


def test_the_rpc_key_never_shows(conf: Path) -> None:
    settings = load(settings_file(conf))
    for text in (repr(settings), str(settings), settings.model_dump_json(), f"{settings}"):
        assert KEY not in text
    assert "**********" in settings.model_dump_json()
    assert "json://127.0.0.1:8080/" not in repr(settings)  # channel URLs hold tokens too
    assert settings.rpc_url_redacted == "https://rpc.example.com/***"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f'rpc_url: "ftp://rpc.example.com/v3/{KEY}"\nrules: [rules/]\nchannels: {{ops: [x]}}\n',
            "conf/watcher.yaml:1: rpc_url: must be an http:// or https:// URL "
            "(its value is not shown)",
        ),
        (
            f'rpc_url: ["https://a/v3/{KEY}"]\nrules: [rules/]\nchannels: {{ops: [x]}}\n',
            "conf/watcher.yaml:1: rpc_url: expected a string",
        ),
        (
            f'rpc_url: "https://a/{KEY}"\nrpc_url: "https://a/{KEY}"\n',
            "conf/watcher.yaml:2: duplicate key 'rpc_url'",
        ),
        (
            f'rpc_url: "https://a/"\nrules: [rules/]\nchannels: {{ops: "json://{KEY}"}}\n',
            "conf/watcher.yaml:3: channels.ops: expected a list",
        ),
    ],
)
def test_problems_never_quote_a_secret(conf: Path, text: str, expected: str) -> None:
    assert problems(settings_file(conf, text)) == [expected]


# -- paths -----------------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_settings_folder(
    conf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shared-rules").mkdir()
    write(tmp_path / "shared-rules" / "b.yaml", RULE.replace("treasury", "other"))
    text = MINIMAL.replace("rules: [rules/]", "rules: [rules, ../shared-rules/b.yaml]")
    path = settings_file(conf, text + "state_path: ./db/../state/w.db\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    settings = load(Path("../conf/watcher.yaml"))
    assert settings.config_path == conf / "watcher.yaml"
    assert settings.state_path == conf / "state" / "w.db"
    assert settings.rules == [conf / "rules", tmp_path / "shared-rules" / "b.yaml"]
    _, rules = load_config(Path("../conf/watcher.yaml"), {"RPC_API_KEY": KEY})
    assert [rule.name for rule in rules] == ["treasury", "other"]
    assert path.exists()


# -- each mistake, as the user reads it -------------------------------------------------------

MISTAKES = [
    pytest.param(
        MINIMAL + "comitment: confirmed\n",
        ["conf/watcher.yaml:6: unknown key 'comitment' (did you mean 'commitment'?)"],
        id="unknown-key",
    ),
    pytest.param(
        MINIMAL + "rpc:\n  timout: 5s\n  max_attempts: 0\n",
        [
            "conf/watcher.yaml:7: rpc: unknown key 'timout' (did you mean 'timeout'?)",
            "conf/watcher.yaml:8: rpc.max_attempts: must be greater than or equal to 1, got 0",
        ],
        id="nested-keys",
    ),
    pytest.param(
        "rules: [rules/]\nchannels: {ops: [x]}\n",
        ["conf/watcher.yaml:1: missing key 'rpc_url'"],
        id="missing-rpc-url",
    ),
    pytest.param(
        MINIMAL + "commitment: processed\nlog_format: text\nlog_level: LOUD\n",
        [
            "conf/watcher.yaml:6: commitment: expected 'finalized' or 'confirmed', got 'processed'",
            "conf/watcher.yaml:7: log_format: expected 'auto', 'json' or 'console', got 'text'",
            "conf/watcher.yaml:8: log_level: expected 'debug', 'info', 'warning', 'error' or "
            "'critical', got 'LOUD'",
        ],
        id="choices",
    ),
    pytest.param(
        MINIMAL.replace("rules: [rules/]", "rules:\n  - rules/\n  - more-rules/\n  - 3"),
        [
            "conf/watcher.yaml:4: rules[1]: no such file or folder: conf/more-rules",
            "conf/watcher.yaml:5: rules[2]: expected a file or folder path, got 3",
        ],
        id="rules-entries",
    ),
    pytest.param(
        MINIMAL.replace("rules: [rules/]", "rules: []"),
        ["conf/watcher.yaml:2: rules: must not be empty"],
        id="no-rules",
    ),
    pytest.param(
        MINIMAL + "default_channels: [ops, pager]\nroutes:\n  critical: [oncall, sms]\n"
        "fallback_channels: [mail]\n",
        [
            "conf/watcher.yaml:6: default_channels[1]: unknown channel 'pager' "
            "(known: oncall, ops)",
            "conf/watcher.yaml:8: routes.critical[1]: unknown channel 'sms' (known: oncall, ops)",
            "conf/watcher.yaml:9: fallback_channels[0]: unknown channel 'mail' "
            "(known: oncall, ops)",
        ],
        id="channel-references",
    ),
    pytest.param(
        MINIMAL + "routes:\n  high: [ops]\n",
        ["conf/watcher.yaml:7: routes: expected 'info', 'warning' or 'critical', got 'high'"],
        id="route-severity",
    ),
    pytest.param(
        MINIMAL + "  bad name: [x]\n  empty: []\n",
        [
            "conf/watcher.yaml:6: channels: channel name 'bad name': use only letters, "
            "digits, - and _",
            "conf/watcher.yaml:7: channels.empty: must not be empty",
        ],
        id="channels",
    ),
    pytest.param(
        MINIMAL + "labels:\n  abc: x\n",
        ["conf/watcher.yaml:7: labels: not a valid base58 public key: 'abc'"],
        id="labels",
    ),
    pytest.param(
        MINIMAL + "delivery:\n  deadline: 24\n  first_retry: 0s\n",
        [
            "conf/watcher.yaml:7: delivery.deadline: 24 has no unit: write e.g. 24s or 24m",
            "conf/watcher.yaml:8: delivery.first_retry: must be more than 0",
        ],
        id="durations",
    ),
    pytest.param(
        MINIMAL + "rpc:\n  budget: 20M\n",
        ['conf/watcher.yaml:7: rpc.budget: budget "20M": say per what, e.g. 20M/month or 20M/day'],
        id="budget-without-period",
    ),
    pytest.param(
        MINIMAL + "retention: 12h\n",
        [
            "conf/watcher.yaml:6: retention: must be at least 1d (the history is kept that "
            "long at least)"
        ],
        id="retention-too-short",
    ),
    pytest.param(
        MINIMAL + "retention: 90\n",
        ["conf/watcher.yaml:6: retention: 90 has no unit: write e.g. 90s or 90m"],
        id="retention-unit",
    ),
    pytest.param(
        MINIMAL + "http:\n  listen: localhost\nexplorer_url: https://x/{kind}/{sig}\n",
        [
            "conf/watcher.yaml:7: http.listen: expected HOST:PORT such as 127.0.0.1:9102, "
            "got 'localhost'",
            "conf/watcher.yaml:8: explorer_url: use only the placeholders {kind} and {id}",
        ],
        id="http-and-explorer",
    ),
    pytest.param(
        "rpc_url: [unclosed\n",
        ["conf/watcher.yaml:2: invalid YAML: did not find expected ',' or ']'"],
        id="yaml-syntax",
    ),
    pytest.param("", ["conf/watcher.yaml: empty file"], id="empty-file"),
    pytest.param(
        "- rpc_url\n",
        ["conf/watcher.yaml:1: expected a mapping of settings, got a list"],
        id="not-a-mapping",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MISTAKES)
def test_each_mistake_is_reported_at_its_line(conf: Path, text: str, expected: list[str]) -> None:
    path = settings_file(conf, text)
    assert problems(path, {"RPC_API_KEY": KEY}) == expected
    with pytest.raises(ConfigError) as raised:
        load_settings(path, {"RPC_API_KEY": KEY})
    assert [str(problem) for problem in raised.value.problems] == expected


def test_no_such_settings_file(conf: Path) -> None:
    assert problems(conf / "nope.yaml") == ["conf/nope.yaml: no such file"]
    assert problems(conf) == ["conf: is a folder, expected a YAML file"]


# -- settings and rules together -------------------------------------------------------------


def test_rule_files_are_checked_even_when_the_settings_have_problems(conf: Path) -> None:
    write(conf / "rules" / "b.yaml", RULE.replace("treasury", "other").replace("[ops]", "[opz]"))
    path = settings_file(conf, MINIMAL + "commitment: fast\n")
    assert problems(path, {"RPC_API_KEY": KEY}) == [
        "conf/watcher.yaml:6: commitment: expected 'finalized' or 'confirmed', got 'fast'",
        "conf/rules/b.yaml:5: notify[0]: unknown channel 'opz' (known: oncall, ops)",
    ]


def test_a_rule_with_no_channel_after_routing(conf: Path) -> None:
    write(conf / "rules" / "a.yaml", RULE.replace("    notify: [ops]\n", "    severity: info\n"))
    path = settings_file(conf, MINIMAL + "routes: {critical: [oncall]}\n")
    assert problems(path, {"RPC_API_KEY": KEY}) == [
        "conf/rules/a.yaml:2: rule 'treasury' has no channel: set notify or default_channels/routes"
    ]
    with pytest.raises(ConfigError):
        load_config(path, {"RPC_API_KEY": KEY})
    settings_file(conf, MINIMAL + "routes: {info: [oncall]}\n")
    settings, rules = load_config(path, {"RPC_API_KEY": KEY})
    assert settings.routes == {"info": ("oncall",)} and [rule.name for rule in rules] == [
        "treasury"
    ]


def test_the_example_settings_validate_without_any_variable_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    assert check_config("examples/watcher.yaml", {}) == []
    settings, rules = load_config("examples/watcher.yaml", {})
    assert settings.rpc_url is not None
    assert settings.rpc_url.get_secret_value() == "http://127.0.0.1:8899/v3/sim-key"
    assert settings.rules == [REPO / "rules"]
    assert settings.state_path == REPO / "state" / "watcher.db"
    every_example = [path for path in (REPO / "rules").glob("*.yaml")]
    assert {rule.name for rule in rules} == {
        rule.name for rule in load_rules(every_example, channels=None)
    }


# -- Settings built in code (the library face) ---------------------------------------------------


def test_settings_built_in_code_equal_the_same_settings_read_from_a_file(
    conf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_file = load(settings_file(conf, MINIMAL + "delivery: {first_retry: 500ms}\n"))
    monkeypatch.setenv("WATCHER_LOG_LEVEL", "debug")  # the environment is not read
    built = Settings.build(
        base=conf,
        rpc_url=f"https://rpc.example.com/v3/{KEY}",
        rules=["rules/"],
        channels={"ops": ["json://127.0.0.1:8080/"], "oncall": ["json://127.0.0.1:8081/"]},
        delivery={"first_retry": "500ms"},
    )
    assert built.model_dump() == from_file.model_dump()
    assert built.rules == [conf / "rules"] and built.state_path == conf / "state/watcher.db"
    assert built.delivery.first_retry == 0.5 and built.log_level == "info"


def test_settings_built_in_code_list_every_problem_and_show_no_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.build(
            rpc_url=f"ftp://rpc.example.com/{KEY}",
            rules=[tmp_path],
            default_channels=["nowhere"],
            delivery={"first_retyr": "1s"},
        )
    text = str(caught.value)
    assert [problem.file for problem in caught.value.problems] == ["Settings.build"] * 3
    assert "rpc_url: must be an http:// or https:// URL" in text
    assert "default_channels[0]" in text and "delivery" in text and "first_retry" in text
    assert KEY not in text


def test_retention_is_a_duration_of_at_least_a_day(conf: Path) -> None:
    assert load(settings_file(conf, MINIMAL + "retention: 30d\n")).retention == 30 * 86400
    assert load(settings_file(conf, MINIMAL + "retention: 1d\n")).retention == 86400
    env = {"RPC_API_KEY": KEY, "WATCHER_RETENTION": "1d12h"}
    assert load(settings_file(conf), env).retention == 36 * 3600
