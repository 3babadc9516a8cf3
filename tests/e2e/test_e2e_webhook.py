"""End to end, the ``webhook://`` channel: a real `watcher run` against the simulator posts to
a real local HTTP receiver, which checks every body against the documented schema (Alertmanager's
webhook, version 4, with watcher's fields under ``watcher``; docs/settings.md, "Structured
webhook"). A nonce rule's inventory, a new nonce account (an event), a validator going delinquent
(firing) and back (resolved) each arrive with their reason, facts and links; the URL's password
is sent as basic auth and never shown."""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from watcher.delivery.webhook import fingerprint
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.nonces import set_nonce_account
from watcher.testing.alertmanager import Alertmanager
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import OUR_VOTE, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

SIGNER = derived_pubkey("e2e webhook signer")
EXISTING, STAGED = derived_pubkey("e2e webhook nonce 1"), derived_pubkey("e2e webhook nonce 2")
PASSWORD = "w3bh00k-s3cret-pw"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
FINGERPRINT = re.compile(r"^[0-9a-f]{16}$")


# -- the schema, strict: every key named, no other, each of its type --------------------------


def exactly(value: Any, keys: set[str], where: str) -> Mapping[str, Any]:
    assert isinstance(value, dict), f"{where}: not an object"
    assert set(value) == keys, f"{where}: keys {sorted(value)} != {sorted(keys)}"
    return value


def strings(value: Any, where: str) -> None:
    assert isinstance(value, dict), f"{where}: not an object"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()), where


ALERTMANAGER_KEYS = {
    *("version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels"),
    *("commonLabels", "commonAnnotations", "externalURL", "alerts"),
}


def valid_alertmanager_body(body: Any, keys: set[str] = ALERTMANAGER_KEYS) -> Mapping[str, Any]:
    """Alertmanager's webhook body (version 4), as a receiver written for it reads it."""
    top = exactly(body, keys, "body")
    assert top["version"] == "4"
    assert isinstance(top["groupKey"], str) and top["groupKey"].startswith("{}:{")
    assert top["truncatedAlerts"] == 0
    assert top["status"] in ("firing", "resolved")
    assert isinstance(top["receiver"], str) and top["receiver"]
    assert isinstance(top["externalURL"], str)
    for key in ("groupLabels", "commonLabels", "commonAnnotations"):
        strings(top[key], key)
    assert isinstance(top["alerts"], list) and top["alerts"], "alerts: a non-empty list"
    for i, alert in enumerate(top["alerts"]):
        shown = exactly(
            alert,
            {
                "status",
                "labels",
                "annotations",
                "startsAt",
                "endsAt",
                "generatorURL",
                "fingerprint",
            },
            f"alerts[{i}]",
        )
        assert shown["status"] in ("firing", "resolved")
        strings(shown["labels"], f"alerts[{i}].labels")
        assert {"alertname", "severity", "subject"} <= set(shown["labels"])
        strings(shown["annotations"], f"alerts[{i}].annotations")
        assert {"summary", "description"} <= set(shown["annotations"])
        assert TIME.match(shown["startsAt"]) and TIME.match(shown["endsAt"]), shown
        assert (shown["endsAt"] == "0001-01-01T00:00:00Z") == (shown["status"] == "firing")
        assert isinstance(shown["generatorURL"], str)
        assert FINGERPRINT.match(shown["fingerprint"])
    return top


def valid_body(body: Any) -> Mapping[str, Any]:
    """Raises AssertionError naming the first place the body departs from the schema: the
    Alertmanager part, and watcher's fields beside it."""
    top = valid_alertmanager_body(body, {*ALERTMANAGER_KEYS, "watcher"})
    own = exactly(top["watcher"], {"version", "id", "title", "text", "alerts"}, "watcher")
    assert own["version"] == 1
    assert all(isinstance(own[k], str) for k in ("id", "title", "text"))
    assert isinstance(own["alerts"], list) and len(own["alerts"]) == len(top["alerts"])
    for i, (alert, shown) in enumerate(zip(own["alerts"], top["alerts"], strict=True)):
        mine = exactly(
            alert,
            {
                *("id", "fingerprint", "rule", "kind", "severity", "subject", "reason"),
                *("repeat", "title", "text", "facts", "links", "queued_at"),
            },
            f"watcher.alerts[{i}]",
        )
        for key in ("id", "rule", "kind", "severity", "subject", "title", "text"):
            assert isinstance(mine[key], str) and mine[key], f"watcher.alerts[{i}].{key}"
        assert mine["reason"] in ("firing", "resolved", "event", "inventory")
        assert isinstance(mine["repeat"], bool)
        assert isinstance(mine["facts"], dict)
        assert isinstance(mine["links"], list) and all(isinstance(u, str) for u in mine["links"])
        assert TIME.match(mine["queued_at"])
        assert mine["fingerprint"] == shown["fingerprint"]
        assert (mine["reason"] == "resolved") == (shown["status"] == "resolved")
        assert mine["rule"] == shown["labels"]["alertname"]
        assert mine["title"] == shown["annotations"]["summary"]
    return top


def test_the_validator_refuses_what_departs_from_the_schema() -> None:
    """The receiver's check is strict: a key missing or added, a type changed, fails it."""
    good: dict[str, Any] = {
        "version": "4",
        "groupKey": '{}:{alertname="r"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "watcher",
        "groupLabels": {"alertname": "r"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "r", "severity": "info", "subject": "s"},
                "annotations": {"summary": "t", "description": "d"},
                "startsAt": "2027-01-15T08:00:00.000Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": "0123456789abcdef",
            }
        ],
        "watcher": {
            "version": 1,
            "id": "n",
            "title": "t",
            "text": "d",
            "alerts": [
                {
                    "id": "k",
                    "fingerprint": "0123456789abcdef",
                    "rule": "r",
                    "kind": "k",
                    "severity": "info",
                    "subject": "s",
                    "reason": "event",
                    "repeat": False,
                    "title": "t",
                    "text": "d",
                    "facts": {},
                    "links": [],
                    "queued_at": "2027-01-15T08:00:00.000Z",
                }
            ],
        },
    }
    valid_body(good)
    for broken in (
        {**good, "extra": 1},
        {k: v for k, v in good.items() if k != "groupKey"},
        {**good, "version": 4},
        {**good, "alerts": [{**good["alerts"][0], "labels": {"alertname": 1}}]},
        {**good, "watcher": {**good["watcher"], "alerts": []}},
    ):
        with pytest.raises(AssertionError):
            valid_body(broken)


@pytest.mark.timeout(60)
def test_a_real_alertmanagers_webhook_body_passes_the_same_check() -> None:
    """The Alertmanager part of the schema is Alertmanager's own: the body a real one posts to
    its webhook passes the check watcher's posts pass, so a receiver written for it reads both."""
    labels = {"alertname": "my-validator", "severity": "critical", "subject": OUR_VOTE}
    with JsonReceiver() as hook, Alertmanager(f"http://127.0.0.1:{hook.port}/") as am:
        request = urllib.request.Request(
            f"{am.api}/alerts",
            data=json.dumps(
                [{"labels": labels, "annotations": {"summary": "s", "description": "d"}}]
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5):
            pass
        [body] = hook.wait_for(1, 20)
    valid_alertmanager_body(body)
    assert body["alerts"][0]["fingerprint"] == fingerprint(labels)


# -- the daemon ---------------------------------------------------------------------------------


def rules() -> list[dict[str, Any]]:
    return [
        {
            "name": "signer-nonces",
            "kind": "nonce_accounts",
            "authorities": [SIGNER],
            "every": "200ms",
            "group_wait": "0s",
            "severity": "critical",
            "notify": ["automation"],
        },
        {
            "name": "my-validator",
            "kind": "delinquent_validators",
            "validators": [OUR_VOTE],
            "every": "200ms",
            "severity": "critical",
            "notify": ["automation"],
            "runbook": "https://runbooks.example.com/delinquent",
        },
    ]


@pytest.fixture
def hook() -> Iterator[JsonReceiver]:
    with JsonReceiver() as receiver:
        yield receiver


@pytest.fixture
def world(tmp_path: Path, hook: JsonReceiver) -> Iterator[World]:
    ledger = small_cluster()
    set_nonce_account(ledger, EXISTING, authority=SIGNER)
    url = f"webhook://automation:{PASSWORD}@127.0.0.1:{hook.port}/alerts?team=ops"
    yield from make_world(tmp_path, ledger, rules=rules(), channels={"automation": [url]})


def posted(hook: JsonReceiver, count: int) -> list[Mapping[str, Any]]:
    bodies = wait_until(
        lambda: hook.received if len(hook.received) >= count else None,
        20,
        f"{count} webhook posts (have {len(hook.received)})",
    )
    return [valid_body(body) for body in bodies]


def watcher_alert(body: Mapping[str, Any]) -> Mapping[str, Any]:
    [alert] = body["watcher"]["alerts"]
    return exactly(alert, set(alert), "watcher.alerts[0]")


def test_inventory_event_firing_and_resolution_reach_a_webhook_as_structured_json(
    world: World, hook: JsonReceiver
) -> None:
    world.daemon.start()

    [inventory] = posted(hook, 1)
    mine = watcher_alert(inventory)
    assert (mine["rule"], mine["kind"], mine["reason"]) == (
        "signer-nonces",
        "nonce_accounts",
        "inventory",
    )
    assert mine["severity"] == "info"
    assert mine["facts"]["count"] == 1
    assert f"https://explorer.solana.com/address/{EXISTING}" in mine["links"]
    assert inventory["alerts"][0]["labels"]["alertname"] == "signer-nonces"

    set_nonce_account(world.ledger, STAGED, authority=SIGNER)
    event = posted(hook, 2)[1]
    mine = watcher_alert(event)
    assert (mine["reason"], mine["severity"], mine["subject"]) == ("event", "critical", SIGNER)
    assert STAGED in mine["text"] and mine["title"] == event["watcher"]["title"]
    assert f"https://explorer.solana.com/address/{STAGED}" in mine["links"]

    world.ledger.mark_delinquent(OUR_VOTE)
    firing = posted(hook, 3)[2]
    assert firing["status"] == "firing"
    assert firing["commonLabels"]["alertname"] == "my-validator"
    mine = watcher_alert(firing)
    assert (mine["reason"], mine["subject"], mine["kind"]) == (
        "firing",
        OUR_VOTE,
        "delinquent_validators",
    )
    assert "https://runbooks.example.com/delinquent" in mine["links"]
    assert firing["alerts"][0]["annotations"]["runbook_url"] == (
        "https://runbooks.example.com/delinquent"
    )

    world.ledger.mark_current(OUR_VOTE)
    resolved = posted(hook, 4)[3]
    assert resolved["status"] == "resolved"
    assert watcher_alert(resolved)["reason"] == "resolved"
    # The same alert in Alertmanager's terms: its labels, hence its fingerprint.
    assert resolved["alerts"][0]["fingerprint"] == firing["alerts"][0]["fingerprint"]
    assert resolved["alerts"][0]["startsAt"] == firing["alerts"][0]["startsAt"]

    # Posted where the URL says, its password as basic auth, each post with its id.
    assert set(hook.paths) == {"/alerts?team=ops"}
    token = base64.b64encode(f"automation:{PASSWORD}".encode()).decode()
    for headers, body in zip(hook.headers, hook.received, strict=True):
        assert headers["Authorization"] == f"Basic {token}"
        assert headers["X-Watcher-Id"] == body["watcher"]["id"]
    assert world.daemon.stop() == 0
    assert PASSWORD not in world.daemon.output()
