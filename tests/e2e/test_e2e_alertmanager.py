"""End to end: the ``alertmanager://`` channel with the real daemon, the simulator and a REAL
Alertmanager (Debian's ``prometheus-alertmanager``) whose webhook receiver is a local listener.

A watched validator goes delinquent: Alertmanager's webhook gets the alert firing, with the
rule's labels and ``type="state"``; Alertmanager restarts with empty storage: the watcher's
re-posts (every 2 s here, a minute by default) give it the alert back; the validator recovers:
the webhook gets it resolved, same labels.
A watcher silence, added without the ledger's secret, stops the re-posts: the alert ends in
Alertmanager; expired, the re-posts bring it back.

A mint's powers, on a channel of an Alertmanager and a ``json://`` webhook (or routed by
severity: critical to Alertmanager, info to the webhook): the first poll's inventory reaches
the webhook and never Alertmanager; the freeze authority removed, then the
mint authority changed once the first is notified: two Alertmanager alerts (``type="event"``,
each its own ``event_id``), both notified, the second's words not lost in the first's."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import Ledger
from watcher.simulator.authorities import set_mint
from watcher.simulator.keys import derived_pubkey
from watcher.testing.alertmanager import Alertmanager
from watcher.testing.net import free_port
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import API_KEY, OUR_VOTE, World, make_world, small_cluster

# Never skipped: `make test` installs Alertmanager (deploy/ensure-monitoring), and a machine
# without it fails here, naming what is missing.
pytestmark = pytest.mark.e2e

PASSWORD = "hunter2-s3cret-pw"
LABELS = {
    "alertname": "my-validator",
    "kind": "delinquent_validators",
    "severity": "critical",
    "subject": OUR_VOTE,
    "type": "state",
}


def rule() -> dict[str, Any]:
    return {
        "name": "my-validator",
        "kind": "delinquent_validators",
        "validators": [OUR_VOTE],
        "every": "200ms",
        "notify": ["am"],
        "severity": "critical",
        "runbook": "https://runbooks.example.com/delinquent",
    }


@contextmanager
def world_with(tmp_path: Path, am: Alertmanager) -> Iterator[World]:
    # Credentials Alertmanager ignores (it asks for none), that must never be shown.
    url = am.url.replace("://", f"://watcher:{PASSWORD}@")
    # Re-posted every 2 s instead of every minute: the restart's recovery is the same path,
    # seen in seconds.
    delivery = {"first_retry": "300ms", "max_backoff": "1s", "alertmanager_repost_every": "2s"}
    yield from make_world(
        tmp_path, small_cluster(), rules=[rule()], channels={"am": [url]}, delivery=delivery
    )


def webhook_alerts(hook: JsonReceiver, status: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager's webhook notifications carried with ``status``."""
    return [
        alert
        for note in hook.received
        for alert in note.get("alerts", [])
        if alert.get("status") == status
    ]


def held(am: Alertmanager) -> list[dict[str, Any]]:
    return [a for a in am.alerts() if a["labels"] == LABELS and a["status"]["state"] == "active"]


@pytest.mark.timeout(240)
def test_firing_restart_and_resolution_reach_alertmanager(tmp_path: Path) -> None:
    with (
        JsonReceiver() as hook,
        Alertmanager(f"http://127.0.0.1:{hook.port}/") as am,
        world_with(tmp_path, am) as world,
    ):
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_delinquent(OUR_VOTE)

        def failed() -> str:
            return f"\n{world.daemon.output()[-3000:]}\n{am.output()[-2000:]}"

        [firing, *_] = wait_until(
            lambda: webhook_alerts(hook, "firing"), 30, "the firing alert" + failed()
        )
        assert firing["labels"] == LABELS
        assert firing["annotations"]["runbook_url"] == "https://runbooks.example.com/delinquent"
        assert "my-validator" in firing["annotations"]["summary"]
        assert firing["annotations"]["description"]

        # An Alertmanager that restarted has forgotten it; the re-posts bring it back.
        am.restart(empty=True)
        assert held(am) == []
        [back] = wait_until(lambda: held(am), 30, "the alert posted again" + failed())
        assert back["startsAt"][:19] == firing["startsAt"][:19]

        world.ledger.mark_current(OUR_VOTE)
        [resolved, *_] = wait_until(
            lambda: webhook_alerts(hook, "resolved"), 30, "the resolution" + failed()
        )
        assert resolved["labels"] == LABELS
        assert world.daemon.stop() == 0
        assert PASSWORD not in world.daemon.output()
        assert PASSWORD.encode() not in (tmp_path / "state" / "watcher.db").read_bytes()


def watcher_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A ``watcher`` command as an operator runs it beside the daemon: with no ledger secret
    (nor $USER, $LOGNAME) in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("RPC_API_KEY", "USER", "LOGNAME")}
    return subprocess.run(
        [sys.executable, "-m", "watcher", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
        timeout=60,
        check=False,
    )


def silenced_label(listen: str) -> str | None:
    """The ``silenced`` label of the rule's ``watcher_alert_firing`` series on /metrics."""
    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(
        r'^watcher_alert_firing\{[^}]*rule="my-validator",[^}]*silenced="(\w+)"', text, re.MULTILINE
    )
    return found.group(1) if found else None


@pytest.mark.timeout(180)
def test_a_watcher_silence_ends_the_alert_in_alertmanager_until_it_expires(
    tmp_path: Path,
) -> None:
    listen = f"127.0.0.1:{free_port()}"
    with (
        JsonReceiver() as hook,
        Alertmanager(f"http://127.0.0.1:{hook.port}/") as am,
        contextmanager(make_world)(
            tmp_path,
            small_cluster(),
            rules=[rule()],
            channels={"am": [am.url]},
            # Re-posted every second (a firing alert then ends 4 s after its last post).
            delivery={
                "first_retry": "300ms",
                "max_backoff": "1s",
                "alertmanager_repost_every": "1s",
            },
            http={"listen": listen},
        ) as world,
    ):
        # The RPC key only in the daemon's environment, as systemd's EnvironmentFile gives it.
        config = world.config.read_text().replace(API_KEY, "${RPC_API_KEY}")
        assert "${RPC_API_KEY}" in config
        world.config.write_text(config)
        world.daemon.env["RPC_API_KEY"] = API_KEY
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_delinquent(OUR_VOTE)

        def failed() -> str:
            return f"\n{world.daemon.output()[-3000:]}\n{am.output()[-2000:]}"

        [first] = wait_until(lambda: held(am), 30, "the firing alert" + failed())
        # Posted again: Alertmanager's copy is renewed past the first post's end.
        wait_until(
            lambda: [a for a in held(am) if a["endsAt"] > first["endsAt"]],
            15,
            "a re-post" + failed(),
        )
        # A scrape shows what the daemon's loop read for it within its short wait (a loaded
        # machine may answer with the read before): the label as it settles.
        wait_until(lambda: silenced_label(listen) == "false", 15, "silenced=false" + failed())
        added = watcher_cli(
            world.config, "silence", "add", "--rule", "my-validator", "--for", "1h",
            "--comment", "node migration",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("silence 1: my-validator (every subject) silenced until")
        # Still firing on /metrics, now labelled silenced (a dashboard still lists it).
        wait_until(lambda: silenced_label(listen) == "true", 15, "silenced=true" + failed())

        # No more re-posts: the alert ends in Alertmanager, whose receiver is told it resolved.
        wait_until(lambda: held(am) == [], 30, "the alert ended in Alertmanager" + failed())
        [ended, *_] = wait_until(
            lambda: webhook_alerts(hook, "resolved"), 30, "the resolution" + failed()
        )
        assert ended["labels"] == LABELS
        firings = len(webhook_alerts(hook, "firing"))
        listed = watcher_cli(world.config, "silence", "list")
        assert listed.returncode == 0, listed.stderr
        assert f"by {pwd.getpwuid(os.getuid()).pw_name}: node migration" in listed.stdout

        # The silence ends, the validator still delinquent: re-posted, it comes back.
        expired = watcher_cli(world.config, "silence", "expire", "1")
        assert (expired.returncode, expired.stdout) == (0, "silence 1 expired\n"), expired.stderr
        [back] = wait_until(lambda: held(am), 30, "the alert back in Alertmanager" + failed())
        wait_until(lambda: silenced_label(listen) == "false", 15, "silenced=false" + failed())
        assert back["startsAt"][:19] == first["startsAt"][:19]  # the same episode
        wait_until(
            lambda: len(webhook_alerts(hook, "firing")) > firings,
            30,
            "the receiver told it fires again" + failed(),
        )
        assert world.daemon.stop() == 0
        assert API_KEY not in world.config.read_text()


MINT = derived_pubkey("e2e alertmanager mint")
COUNCIL, ATTACKER = derived_pubkey("e2e am council"), derived_pubkey("e2e am attacker")


def short(key: str) -> str:
    return f"{key[:4]}…{key[-4:]}"


@contextmanager
def powers_world(
    tmp_path: Path, am: Alertmanager, inbox: JsonReceiver, routed: bool
) -> Iterator[World]:
    """A critical rule on a mint's powers: with ``notify``, to one channel of Alertmanager and
    a webhook; ``routed``, by severity: critical to Alertmanager, info to the webhook."""
    ledger = Ledger(seed=36)
    set_mint(ledger, MINT, mint_authority=COUNCIL, freeze_authority=COUNCIL)
    powers = {
        "name": "mint-powers",
        "kind": "token_authorities",
        "mints": [MINT],
        "every": "200ms",
        "group_wait": "0s",
        "severity": "critical",
    }
    if routed:
        channels = {"pager": [am.url], "inbox": [inbox.url]}
        routes = {"critical": ["pager"], "info": ["inbox"]}
        yield from make_world(tmp_path, ledger, rules=[powers], channels=channels, routes=routes)
    else:
        channels = {"page": [am.url, inbox.url]}
        powers["notify"] = ["page"]
        yield from make_world(tmp_path, ledger, rules=[powers], channels=channels)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("routed", [False, True], ids=["notify", "routes"])
def test_an_inventory_is_not_paged_and_two_events_on_one_mint_are_two_alerts(
    tmp_path: Path, routed: bool
) -> None:
    with (
        JsonReceiver() as hook,
        JsonReceiver() as inbox,
        Alertmanager(f"http://127.0.0.1:{hook.port}/") as am,
        powers_world(tmp_path, am, inbox, routed) as world,
    ):
        world.daemon.start()

        def failed() -> str:
            return f"\n{world.daemon.output()[-3000:]}\n{am.output()[-2000:]}"

        [inventory] = inbox.wait_for(1, 30)
        assert inventory["title"] == "[INFO] mint-powers: 1 watched mint, 1 decoded (inventory)"

        set_mint(world.ledger, MINT, freeze_authority=None)
        freeze = (
            f"[CRITICAL] mint-powers: mint {short(MINT)}: freeze authority removed "
            f"(was {short(COUNCIL)})"
        )
        [first] = wait_until(
            lambda: webhook_alerts(hook, "firing"), 30, "the first event" + failed()
        )
        assert first["annotations"]["summary"] == freeze
        # Sent in order to each URL: the inventory, had it gone to Alertmanager, came first.
        assert [a["annotations"]["summary"] for a in am.alerts()] == [
            first["annotations"]["summary"]
        ]

        set_mint(world.ledger, MINT, mint_authority=ATTACKER)
        changed = (
            f"[CRITICAL] mint-powers: mint {short(MINT)}: mint authority changed: "
            f"{short(COUNCIL)} -> {short(ATTACKER)}"
        )

        def both_notified() -> list[dict[str, Any]]:
            seen = {a["labels"]["event_id"]: a for a in webhook_alerts(hook, "firing")}
            return list(seen.values()) if len(seen) == 2 else []

        notified = wait_until(both_notified, 30, "the second event" + failed())
        assert sorted(a["annotations"]["summary"] for a in notified) == [freeze, changed]
        for alert in notified:
            assert alert["labels"] == {
                "alertname": "mint-powers",
                "kind": "token_authorities",
                "severity": "critical",
                "subject": MINT,
                "type": "event",
                "event_id": alert["labels"]["event_id"],
            }
        # Alertmanager holds both, each with its own words.
        assert sorted(a["annotations"]["summary"] for a in am.alerts()) == [freeze, changed]
        assert len(hook.received) >= 2  # a notification for each
        # The webhook has the changes too when it is one of the rule's channels; routed by
        # severity, it is the info route's, which has the inventory only.
        changes = [] if routed else [freeze, changed]
        assert [note["title"] for note in inbox.received] == [inventory["title"], *changes]
        assert all("inventory" not in a["annotations"]["summary"] for a in am.alerts())
        assert world.daemon.stop() == 0
