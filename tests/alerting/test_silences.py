"""Silences (``watcher silence add|list|expire``) and ``watcher notify-test``: the pure matching,
the store, the commands as a user types them, and the real daemon muting a rule while it runs."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner, Result

from watcher.alerting.pipeline import mark_silenced, silenced_by
from watcher.cli import app
from watcher.core.events import SILENCE_FACT, AlertMessage, NewSilence, Silence
from watcher.core.outbox_rows import url_id
from watcher.delivery.notify_check import public_form
from watcher.state.store import SqliteStore
from watcher.testing.daemon import write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import TREASURY, World, all_polled, make_world, rules, small_cluster

VALIDATOR = "Vote111111111111111111111111111111111111111"
OTHER = "Other11111111111111111111111111111111111111"
T0 = 1_800_000_000.0

runner = CliRunner()


def cli(config: Path, *args: str) -> Result:
    return runner.invoke(app, [*args, "--config", str(config)], env={"USER": "alice"})


def silence(rule: str = "my-validator", subject: str | None = None, **kw: Any) -> Silence:
    values: dict[str, Any] = {
        "id": 1,
        "rule": rule,
        "subject": subject,
        "starts_at": T0,
        "ends_at": T0 + 3600,
        "comment": "maintenance",
        "created_by": "alice",
        "created_at": T0,
        **kw,
    }
    return Silence(**values)


def alert(rule: str = "my-validator", subject: str = VALIDATOR) -> AlertMessage:
    return AlertMessage(
        rule=rule,
        severity="critical",
        subject=subject,
        reason="firing",
        dedup_key=f"{rule}|{subject}|1|firing",
        title="t",
        body="b",
        channels=("ops",),
        facts={"rule": rule, "subject": subject},
    )


# -- which alert a silence mutes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_silence", "the_alert", "now", "muted"),
    [
        (silence(), alert(), T0 + 10, True),  # no subject: every subject of the rule
        (silence(), alert(subject=OTHER), T0 + 10, True),
        (silence(), alert(rule="drift"), T0 + 10, False),  # another rule
        (silence(subject=VALIDATOR), alert(), T0 + 10, True),
        (silence(subject=VALIDATOR), alert(subject=OTHER), T0 + 10, False),
        (silence(), alert(), T0, True),  # starts_at is included...
        (silence(), alert(), T0 - 1, False),  # ...nothing before it
        (silence(), alert(), T0 + 3599.9, True),
        (silence(), alert(), T0 + 3600, False),  # ends_at is excluded: it ended by itself
        (silence(expired_at=T0 + 60), alert(), T0 + 60, False),  # expired by hand
        (silence(expired_at=T0 + 60), alert(), T0 + 30, True),  # (history before that)
    ],
)
def test_silenced_by(
    the_silence: Silence, the_alert: AlertMessage, now: float, muted: bool
) -> None:
    assert silenced_by([the_silence], the_alert, now) == (the_silence if muted else None)


def test_silenced_by_names_the_first_matching_silence() -> None:
    other_rule, by_subject, every = (
        silence(id=1, rule="drift"),
        silence(id=2, subject=VALIDATOR),
        silence(id=3),
    )
    assert silenced_by([other_rule, by_subject, every], alert(), T0 + 1) == by_subject
    assert silenced_by([], alert(), T0 + 1) is None


def test_mark_silenced_records_the_silence_in_the_muted_alerts_facts_only() -> None:
    muted, kept = alert(), alert(rule="drift")
    [marked, unmarked] = mark_silenced([muted, kept], [silence(id=7)], T0 + 1)
    assert marked.facts[SILENCE_FACT] == {"id": 7, "comment": "maintenance", "ends_at": T0 + 3600}
    assert marked.facts["subject"] == VALIDATOR and marked.title == muted.title
    assert unmarked == kept


# -- the store -----------------------------------------------------------------------------------


def test_store_adds_lists_and_expires_silences(tmp_store: SqliteStore) -> None:
    first = tmp_store.add_silence(
        NewSilence("treasury", None, T0, T0 + 60, "moving funds", "alice"), T0
    )
    second = tmp_store.add_silence(
        NewSilence("drift", VALIDATOR, T0, T0 + 600, "upgrade", None), T0
    )
    assert tmp_store.active_silences(T0 + 1) == [first, second]
    assert tmp_store.list_silences(T0 + 1) == [second, first]  # newest first

    assert tmp_store.active_silences(T0 + 60) == [second]  # the first ended by itself
    assert tmp_store.list_silences(T0 + 60) == [second]
    assert tmp_store.expire_silence(second.id, T0 + 70)
    assert not tmp_store.expire_silence(second.id, T0 + 80), "already expired"
    assert not tmp_store.expire_silence(999, T0 + 80), "no such silence"
    assert tmp_store.active_silences(T0 + 70) == []
    assert tmp_store.list_silences(T0 + 70) == []
    everything = tmp_store.list_silences(T0 + 70, include_expired=True)
    assert [(s.id, s.expired_at, s.ended_at()) for s in everything] == [
        (second.id, T0 + 70, T0 + 70),
        (first.id, None, T0 + 60),
    ]


# -- the commands --------------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path,
        rpc_url="http://127.0.0.1:9/v3/key",
        channels={"hooks": ["json://127.0.0.1:9/"]},
        rules=rules(),
    )


def silence_id(result: Result) -> int:
    assert result.exit_code == 0, result.output
    found = re.fullmatch(r"silence (\d+): .*\n", result.stdout)
    assert found, result.stdout
    return int(found.group(1))


def test_silence_add_list_expire(config: Path) -> None:
    with freeze_time("2026-11-21 12:00:00", real_asyncio=True) as clock:
        added = cli(
            config,
            "silence",
            "add",
            "--rule",
            "treasury",
            "--for",
            "2h",
            "--comment",
            "moving funds",
        )
        first = silence_id(added)
        assert "treasury (every subject) silenced until 2026-11-21T14:00:00Z" in added.stdout
        validator = rules()[2]["validators"][0]
        clock.tick(60)  # 12:01
        second = silence_id(
            cli(
                config,
                "silence",
                "add",
                "--rule",
                "my-validator",
                "--subject",
                validator,
                "--for",
                "30m",
                "--comment",
                "reboot",
            )
        )

        listed = cli(config, "silence", "list")
        assert listed.exit_code == 0
        lines = listed.stdout.splitlines()
        assert [line.split()[:6] for line in lines] == [
            [str(second), "active", "my-validator", validator, "2026-11-21T12:01:00Z", "->"],
            [str(first), "active", "treasury", "*", "2026-11-21T12:00:00Z", "->"],
        ]
        assert lines[0].split()[6] == "2026-11-21T12:31:00Z"
        assert lines[1].split()[6] == "2026-11-21T14:00:00Z"
        assert lines[1].endswith("by alice: moving funds")

        listed_json = cli(config, "silence", "list", "--json").stdout
        as_json = [json.loads(line) for line in listed_json.splitlines()]
        assert [(s["id"], s["rule"], s["created_by"], s["state"]) for s in as_json] == [
            (second, "my-validator", "alice", "active"),
            (first, "treasury", "alice", "active"),
        ]
        assert as_json[1]["ends_at"] - as_json[1]["starts_at"] == 7200

        clock.move_to("2026-11-21 12:10:00")
        expired = cli(config, "silence", "expire", str(first))
        assert (expired.exit_code, expired.stdout) == (0, f"silence {first} expired\n")
        assert [line.split()[0] for line in cli(config, "silence", "list").stdout.splitlines()] == [
            str(second)
        ]
        everything = cli(config, "silence", "list", "--all").stdout.splitlines()
        assert [line.split()[:2] for line in everything] == [
            [str(second), "active"],
            [str(first), "expired"],
        ]
        assert "2026-11-21T12:00:00Z -> 2026-11-21T12:10:00Z" in everything[1]  # ended when expired


def test_a_silence_for_1h_is_listed_until_its_end_and_gone_a_second_after(config: Path) -> None:
    """The commands read the wall clock: frozen, a silence added at 12:00 ``--for 1h`` ends at
    13:00:00 exactly, as ``add`` says, ``list`` shows it to the last second and not after."""
    with freeze_time("2026-11-21 12:00:00", real_asyncio=True) as clock:
        added = cli(
            config, "silence", "add", "--rule", "treasury", "--for", "1h", "--comment", "upgrade"
        )
        new = silence_id(added)
        assert "silenced until 2026-11-21T13:00:00Z" in added.stdout

        clock.move_to("2026-11-21 12:59:00")
        [line] = cli(config, "silence", "list").stdout.splitlines()
        assert line.split()[:3] == [str(new), "active", "treasury"]
        assert "2026-11-21T12:00:00Z -> 2026-11-21T13:00:00Z" in line
        clock.tick(59)  # 12:59:59
        assert cli(config, "silence", "list").stdout.split()[:2] == [str(new), "active"]

        clock.move_to("2026-11-21 13:00:01")
        assert cli(config, "silence", "list").stdout == "no active silences\n"
        [ended] = cli(config, "silence", "list", "--all").stdout.splitlines()
        assert ended.split()[:2] == [str(new), "expired"]
        assert "-> 2026-11-21T13:00:00Z" in ended
        late = cli(config, "silence", "expire", str(new))
        assert (late.exit_code, late.stdout) == (
            0,
            f"silence {new} had already ended at 2026-11-21T13:00:00Z\n",
        )


def test_silence_add_refuses_without_a_comment(config: Path) -> None:
    missing = cli(config, "silence", "add", "--rule", "treasury", "--for", "1h")
    assert missing.exit_code == 2 and "--comment" in missing.output
    blank = cli(config, "silence", "add", "--rule", "treasury", "--for", "1h", "--comment", "  ")
    assert blank.exit_code == 2 and "--comment must say why" in blank.stderr
    assert not (config.parent / "state" / "watcher.db").exists()  # nothing was written


def test_silence_add_refuses_an_unknown_rule_subject_or_duration(config: Path) -> None:
    unknown = cli(config, "silence", "add", "--rule", "tresury", "--for", "1h", "--comment", "x")
    assert unknown.exit_code == 2
    assert "no rule named 'tresury'" in unknown.stderr
    assert "drift, my-validator, treasury, whales; built-in: " in unknown.stderr
    stranger = cli(
        config,
        "silence",
        "add",
        "--rule",
        "treasury",
        "--subject",
        VALIDATOR,
        "--for",
        "1h",
        "--comment",
        "x",
    )
    assert stranger.exit_code == 2 and f"does not watch {VALIDATOR}" in stranger.stderr
    for bad in ("90", "2 hours", "0s"):
        result = cli(config, "silence", "add", "--rule", "treasury", "--for", bad, "--comment", "x")
        assert result.exit_code == 2 and "--for" in result.stderr, (bad, result.output)
    assert not (config.parent / "state" / "watcher.db").exists()  # nothing was written


def test_the_daemons_built_in_alerts_can_be_silenced(config: Path) -> None:
    added = cli(
        config,
        "silence",
        "add",
        "--rule",
        "rpc_unhealthy",
        "--subject",
        "rpc",
        "--for",
        "1h",
        "--comment",
        "provider maintenance",
    )
    assert "rpc_unhealthy (rpc) silenced until" in added.stdout
    silence_id(added)
    # rpc_disagreement: one subject per target put to a vote (a state rule's), e.g. votes:cluster
    added = cli(
        config,
        "silence",
        "add",
        "--rule",
        "rpc_disagreement",
        "--subject",
        "votes:cluster",
        "--for",
        "1h",
        "--comment",
        "node B resyncing",
    )
    assert "rpc_disagreement (votes:cluster) silenced until" in added.stdout, added.output
    stranger = cli(
        config,
        "silence",
        "add",
        "--rule",
        "rpc_disagreement",
        "--subject",
        "rpc",
        "--for",
        "1h",
        "--comment",
        "x",
    )
    assert stranger.exit_code == 2 and "it watches: " in stranger.stderr


def test_silence_expire_of_an_unknown_id_fails_clearly(config: Path) -> None:
    result = cli(config, "silence", "expire", "42")
    assert result.exit_code == 1 and "no silence 42" in result.stderr
    silence_id(cli(config, "silence", "add", "--rule", "treasury", "--for", "1h", "--comment", "x"))
    result = cli(config, "silence", "expire", "42")
    assert result.exit_code == 1 and "no silence 42" in result.stderr


def test_the_commands_work_while_the_daemon_holds_the_database_open(config: Path) -> None:
    store = SqliteStore(config.parent / "state" / "watcher.db")  # as the running daemon does (WAL)
    try:
        with store.transaction():  # and it has written something
            store.db.execute("UPDATE silences SET comment = comment")
        new = silence_id(
            cli(
                config,
                "silence",
                "add",
                "--rule",
                "whales",
                "--for",
                "1h",
                "--comment",
                "rebalancing",
            )
        )
        [seen] = store.active_silences(time.time())
        assert (seen.id, seen.rule, seen.comment, seen.created_by) == (
            new,
            "whales",
            "rebalancing",
            "alice",
        )
        assert cli(config, "silence", "expire", str(new)).exit_code == 0
        assert store.active_silences(time.time()) == []
    finally:
        store.close()


# -- the daemon mutes what is silenced -------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, small_cluster())


def treasury_history(config: Path) -> list[dict[str, Any]]:
    result = cli(config, "alerts", "--json", "--rule", "treasury")
    if result.exit_code != 0:  # the daemon has not created the database yet
        return []
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.e2e  # starts `watcher run`
def test_a_silence_mutes_the_running_daemon_until_it_is_expired(world: World) -> None:
    world.daemon.start()
    all_polled(world)
    silenced = silence_id(
        cli(
            world.config,
            "silence",
            "add",
            "--rule",
            "treasury",
            "--for",
            "1h",
            "--comment",
            "moving funds",
        )
    )

    [muted_sig] = world.ledger.add_transactions(TREASURY, 1)
    [record] = wait_until(lambda: treasury_history(world.config), 15, "the muted alert")
    assert record["status"] == "silenced" and record["deliveries"] == []
    assert record["facts"][SILENCE_FACT]["id"] == silenced
    assert muted_sig in record["body"]
    world.wait_polls("getSignaturesForAddress", 3)
    assert world.notes() == [], world.titles()
    [line] = cli(world.config, "alerts").stdout.splitlines()
    assert " silenced " in line and "treasury" in line and f"(silence {silenced})" in line

    assert cli(world.config, "silence", "expire", str(silenced)).exit_code == 0
    [sent_sig] = world.ledger.add_transactions(TREASURY, 1)
    [note] = world.wait_notes(1)
    assert sent_sig in note["message"] and muted_sig not in note["message"]
    assert world.daemon.stop() == 0
    statuses = [r["status"] for r in treasury_history(world.config)]
    assert statuses == ["sent", "silenced"]  # newest first


@pytest.mark.e2e  # starts `watcher run`
def test_a_short_silence_ends_by_itself_and_alerts_flow_again(world: World) -> None:
    world.daemon.start()
    all_polled(world)
    short = silence_id(
        cli(
            world.config, "silence", "add", "--rule", "treasury", "--for", "1s", "--comment", "blip"
        )
    )
    wait_until(
        lambda: cli(world.config, "silence", "list").stdout == "no active silences\n",
        10,
        "the 1s silence to end",
    )
    [sig] = world.ledger.add_transactions(TREASURY, 1)
    [note] = world.wait_notes(1)
    assert sig in note["message"]
    assert world.daemon.stop() == 0
    [listed] = cli(world.config, "silence", "list", "--all").stdout.splitlines()
    assert listed.split()[:3] == [str(short), "expired", "treasury"]


# -- notify-test ---------------------------------------------------------------------------------

PASSWORD, PATH_TOKEN = "s3cretPassw0rd", "T0KENsecretXYZ1234567"


def secret_url(receiver: JsonReceiver) -> str:
    return f"json://alice:{PASSWORD}@127.0.0.1:{receiver.port}/hooks/{PATH_TOKEN}"


def test_notify_test_reaches_every_url_of_the_channel(tmp_path: Path) -> None:
    with JsonReceiver() as first, JsonReceiver() as second:
        config = write_config(
            tmp_path,
            rpc_url="http://127.0.0.1:9/v3/key",
            rules=rules(),
            channels={"hooks": [secret_url(first), second.url], "other": ["json://127.0.0.1:9/"]},
        )
        result = cli(config, "notify-test", "--channel", "hooks")
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [
            f"hooks  json://127.0.0.1:{first.port} (id {url_id(secret_url(first))})  ok",
            f"hooks  json://127.0.0.1:{second.port} (id {url_id(second.url)})  ok",
        ]
        for receiver in (first, second):
            [note] = receiver.received
            assert note["title"].startswith("watcher test notification from ")
            assert "'hooks'" in note["message"] and "No action is needed" in note["message"]
        assert "/hooks/" + PATH_TOKEN in first.paths[0]  # the real URL was used
        assert PASSWORD not in result.output and PATH_TOKEN not in result.output


def test_notify_test_reports_a_refusing_url_and_exits_1(tmp_path: Path) -> None:
    with JsonReceiver() as working, JsonReceiver() as refusing:
        refusing.refuse_all()
        config = write_config(
            tmp_path,
            rpc_url="http://127.0.0.1:9/v3/key",
            rules=rules(),
            channels={"hooks": [working.url, secret_url(refusing)]},
        )
        result = cli(config, "notify-test", "--channel", "hooks")
        assert result.exit_code == 1
        ok_line, failed_line = result.stdout.splitlines()
        assert ok_line.startswith(f"hooks  json://127.0.0.1:{working.port} ")
        assert ok_line.endswith("  ok")
        assert failed_line.startswith(f"hooks  json://127.0.0.1:{refusing.port} ")
        assert "  FAILED: " in failed_line
        assert len(refusing.refused) == 1 and refusing.received == []
        assert PASSWORD not in result.output and PATH_TOKEN not in result.output


def test_notify_test_of_an_unknown_channel_lists_the_known_ones(config: Path) -> None:
    result = cli(config, "notify-test", "--channel", "opps")
    assert result.exit_code == 2
    assert "no channel named 'opps' (channels: hooks)" in result.stderr


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        (
            "json://alice:pw123456@hooks.example.com:8443/T0KEN12345678",
            "json://hooks.example.com:8443",
            ["pw123456", "T0KEN12345678", "alice"],
        ),
        (
            "tgram://123456789:AAbbccddeeffgghhiijj/12345",
            "tgram://***",
            ["AAbbccddeeffgghhiijj", "123456789"],
        ),
        (
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#ops",
            "slack://***",
            ["T1JJ3T3L2", "TIiajkdnlazkcOXrIdevi7FQ"],
        ),
        (
            "mailto://user:p4ssw0rd@example.com?to=ops@example.com",
            "mailto://example.com",
            ["p4ssw0rd"],
        ),
    ],
)
def test_a_channel_url_is_shown_without_its_secrets(
    url: str, shown: str, secrets: list[str]
) -> None:
    text = public_form(url)
    assert text.startswith(shown + " (id ")
    assert all(secret not in text for secret in secrets)
