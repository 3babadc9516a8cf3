"""`rpc_urls` and `quorum` in the settings: what a user sees for each mistake, and what is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.settings_files import RULE, load, problems, settings_file, write

KEY_A, KEY_B = "k3yA-0f-the-rpc-s3cret", "k3yB-0f-the-rpc-s3cret"
ENV = {"KEY_A": KEY_A, "KEY_B": KEY_B}
CHANNELS = 'rules: [rules/]\nchannels:\n  ops: ["json://127.0.0.1:8080/"]\n'


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``conf/`` (seen as such from the working folder) holding ``rules/a.yaml``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "rules").mkdir(parents=True)
    write(tmp_path / "conf" / "rules" / "a.yaml", RULE)
    return tmp_path / "conf"


TWO = """rpc_urls:
  - "https://a.example.com/v3/${KEY_A}"
  - url: "https://b.example.com/v3/${KEY_B}"
    max_rps: 10
"""


def test_several_endpoints_are_read_with_their_max_rps(conf: Path) -> None:
    settings = load(settings_file(conf, TWO + "quorum: 2\n" + CHANNELS), ENV)
    urls = [endpoint.url.get_secret_value() for endpoint in settings.endpoints]
    assert urls == [f"https://a.example.com/v3/{KEY_A}", f"https://b.example.com/v3/{KEY_B}"]
    assert [endpoint.max_rps for endpoint in settings.endpoints] == [None, 10]
    assert settings.quorum == 2
    assert settings.rpc_url_redacted == "https://a.example.com/***, https://b.example.com/***"
    assert KEY_A not in repr(settings) and KEY_B not in repr(settings)


def test_one_rpc_url_is_one_endpoint_and_quorum_defaults_to_one(conf: Path) -> None:
    settings = load(
        settings_file(conf, 'rpc_url: "https://a.example.com/v3/${KEY_A}"\n' + CHANNELS), ENV
    )
    assert [e.url.get_secret_value() for e in settings.endpoints] == [
        f"https://a.example.com/v3/{KEY_A}"
    ]
    assert settings.quorum == 1


def test_rpc_urls_can_come_from_the_environment(conf: Path) -> None:
    env = {
        "WATCHER_RPC_URLS": f'["http://127.0.0.1:1/v3/{KEY_A}", {{"url": "http://127.0.0.1:2/v3/{KEY_B}"}}]'
    }
    settings = load(settings_file(conf, CHANNELS), env)
    assert len(settings.endpoints) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            'rpc_url: "https://a.example.com/v3/${KEY_A}"\n' + TWO + CHANNELS,
            "conf/watcher.yaml:2: rpc_urls: give either rpc_url (one endpoint) or rpc_urls, "
            "not both",
            id="both",
        ),
        pytest.param(
            'rpc_url: "https://a.example.com/v3/${KEY_A}"\nquorum: 2\n' + CHANNELS,
            "conf/watcher.yaml:2: quorum: quorum 2 needs at least 2 endpoints in rpc_urls",
            id="quorum-above-the-endpoints",
        ),
        pytest.param(
            'rpc_urls:\n  - "https://a.example.com/v3/${KEY_A}"\n  - "ftp://b/v3/${KEY_B}"\n'
            + CHANNELS,
            "conf/watcher.yaml:3: rpc_urls[1].url: must be an http:// or https:// URL "
            "(its value is not shown)",
            id="not-http",
        ),
        pytest.param(
            'rpc_urls:\n  - url: "https://a.example.com/v3/${KEY_A}"\n    max_rps: 0\n' + CHANNELS,
            "conf/watcher.yaml:3: rpc_urls[0].max_rps: must be greater than 0",
            id="max-rps-zero",
        ),
        pytest.param(
            "rpc_urls: []\n" + CHANNELS,
            "conf/watcher.yaml:1: rpc_urls: must not be empty",
            id="empty",
        ),
    ],
)
def test_each_mistake_names_its_line_and_never_a_key(conf: Path, text: str, expected: str) -> None:
    found = problems(settings_file(conf, text), ENV)
    assert found == [expected]
    assert not any(KEY_A in p or KEY_B in p for p in found)
