"""Fuzz corpus: garbage and mutated answers for the four methods the daemon polls, served
interleaved with good answers; then real changes, each of which must be notified.

Phases, with the real daemon against the simulator:

0. baseline, then a few real changes (notified: expected) so that "stale" answers exist: the
   answers taken before those changes are replayed later with their older context slot;
1. the corpus (seeded): one garbage answer per method at a time, each followed by good answers.
   Nothing changes on the ledger meanwhile, so every notification of this phase is a false alert;
2. a real change on every target (a transaction on each address, a holder's balance up 50 % on
   each mint, the watched validator delinquent, the watched node on an older version). A target
   whose change is not notified within ``sweeps`` polls of it is wedged.
"""

from __future__ import annotations

import copy
import json
import random
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    API_KEY,
    DaemonProcess,
    Receiver,
    Table,
    key_leaks,
    outbox_pending,
    rss_kb,
    wait_for,
    write_config,
)

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey

SIGS, HOLDERS, VOTES, NODES = (
    "getSignaturesForAddress",
    "getTokenLargestAccounts",
    "getVoteAccounts",
    "getClusterNodes",
)
METHODS = (SIGS, HOLDERS, VOTES, NODES)
ADDRESSES = [derived_pubkey(f"bench fuzz address {i}") for i in range(3)]
MINTS = [derived_pubkey(f"bench fuzz mint {i}") for i in range(2)]
HOLDER_KEYS = {m: [derived_pubkey(f"bench fuzz {m} holder {i}") for i in range(20)] for m in MINTS}
BIG_VOTE, BIG_NODE = derived_pubkey("bench fuzz big vote"), derived_pubkey("bench fuzz big node")
OUR_VOTE, OUR_NODE = derived_pubkey("bench fuzz our vote"), derived_pubkey("bench fuzz our node")
DRIFT_VOTE = derived_pubkey("bench fuzz drift vote")
DRIFT_NODE = derived_pubkey("bench fuzz drift node")
FEATURE_SET = 3640012085
U64_OVER = 2**64

Json = Any
Mutator = Callable[[Json, random.Random], Json]


def _ledger(seed: int) -> Ledger:
    ledger = Ledger(seed=seed)
    for address in ADDRESSES:
        ledger.add_transactions(address, 5)
    for mint in MINTS:
        ledger.set_holders(
            mint, [(h, 1_000_000 * (100 - i)) for i, h in enumerate(HOLDER_KEYS[mint])]
        )
    for vote, node, stake in (
        (BIG_VOTE, BIG_NODE, 10**16),
        (OUR_VOTE, OUR_NODE, 5 * 10**13),
        (DRIFT_VOTE, DRIFT_NODE, 4 * 10**13),
    ):
        ledger.set_validator(vote, node, stake=stake)
        ledger.set_node(node, version="2.3.6", feature_set=FEATURE_SET)
    return ledger


def _rules() -> list[dict[str, Any]]:
    fast = {"every": "200ms", "notify": ["hooks"]}
    events = {**fast, "group_wait": "200ms"}
    # One rule per address and per mint: each change is then a message of its own, never a
    # digest of several subjects (a digest lists titles, not signatures or accounts).
    return [
        *(
            {"name": f"fuzz-tx-{i}", "kind": "new_transactions", "addresses": [address], **events}
            for i, address in enumerate(ADDRESSES)
        ),
        *(
            {
                "name": f"fuzz-holders-{i}",
                "kind": "holder_changes",
                "mints": [mint],
                "min_change_pct": 10,
                **events,
            }
            for i, mint in enumerate(MINTS)
        ),
        {"name": "my-validator", "kind": "delinquent_validators", "validators": [OUR_VOTE], **fast},
        {"name": "drift", "kind": "version_drift", "validators": [DRIFT_NODE], **fast},
    ]


# -- the corpus ------------------------------------------------------------------------------


def _one(items: list[Json], rng: random.Random) -> dict[str, Any]:
    dicts = [i for i in items if isinstance(i, dict)]
    return rng.choice(dicts) if dicts else {}


def _entries(stale: list[Json]) -> Callable[[Json], list[Json]]:
    """The real entries, or (the usual answer with ``until`` being empty) old ones."""
    return lambda obj: obj if isinstance(obj, list) and obj else copy.deepcopy(stale[:3])


def _signature_mutators(stale: list[Json]) -> dict[str, Mutator]:
    entries = _entries(stale)

    def on_one(field: str, value: Callable[[Json], Json]) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            items = entries(obj)
            entry = _one(items, rng)
            entry[field] = value(entry.get(field))
            return items

        return mutate

    def without(obj: Json, rng: random.Random) -> Json:
        items = entries(obj)
        entry = _one(items, rng)
        entry.pop("slot", None)
        entry.pop("blockTime", None)
        return items

    return {
        "slot 2^64": on_one("slot", lambda _: U64_OVER),
        "slot -5": on_one("slot", lambda _: -5),
        "slot as string": on_one("slot", lambda v: str(v)),
        "blockTime in ms": on_one("blockTime", lambda v: (v or 1_700_000_000) * 1000),
        "blockTime 10^30": on_one("blockTime", lambda _: 10**30),
        "signature as number": on_one("signature", lambda _: 12345),
        "signature 200 KB": on_one("signature", lambda _: "5" * 200_000),
        "signature empty": on_one("signature", lambda _: ""),
        "memo 500 KB": on_one("memo", lambda _: "[9] " + "m" * 500_000),
        "err nested 60 deep": on_one("err", lambda _: _nested(60)),
        "confirmationStatus processed": on_one("confirmationStatus", lambda _: "processed"),
        "slot and blockTime missing": without,
        "entry null": lambda obj, rng: [*entries(obj), None],
        "entries twice": lambda obj, rng: entries(obj) * 2,
        "old entries replayed (until ignored)": lambda obj, rng: copy.deepcopy(stale[:5]),
        "old entries, slots moved up 2^40": lambda obj, rng: [
            {**e, "slot": e["slot"] + 2**40} for e in copy.deepcopy(stale[:3])
        ],
    }


def _nested(depth: int) -> Json:
    value: Json = {"InstructionError": [0, "Custom"]}
    for _ in range(depth):
        value = {"x": value}
    return value


def _holder_mutators(stale: dict[str, str]) -> dict[str, Mutator]:
    def values(obj: Json) -> list[Json]:
        value = obj.get("value") if isinstance(obj, dict) else None
        return value if isinstance(value, list) else []

    def on_one(field: str, value: Callable[[Json], Json]) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            _one(values(obj), rng)[field] = value(None)
            return obj

        return mutate

    def context(slot: Callable[[int], Json]) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            obj["context"]["slot"] = slot(int(obj["context"]["slot"]))
            return obj

        return mutate

    def stale_replay(obj: Json, rng: random.Random) -> Json:
        keys = {e.get("address") for e in values(obj) if isinstance(e, dict)}
        for text in stale.values():
            old = json.loads(text)
            if keys & {e["address"] for e in old["value"]}:
                return old
        return obj

    def set_value(value: Callable[[list[Json]], Json]) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            obj["value"] = value(values(obj))
            return obj

        return mutate

    return {
        "stale answer (older context slot)": stale_replay,
        "context slot 2^64": context(lambda _: U64_OVER),
        "context slot far back": context(lambda s: max(0, s - 10_000)),
        "context missing": lambda obj, rng: {"value": values(obj)},
        "amount 10^30": on_one("amount", lambda _: str(10**30)),
        "amount -1000": on_one("amount", lambda _: "-1000"),
        "amount NaN": on_one("amount", lambda _: "NaN"),
        "amount as number": on_one("amount", lambda _: 5),
        "decimals 300": on_one("decimals", lambda _: 300),
        "uiAmount as string": on_one("uiAmount", lambda _: "lots"),
        "address as number": on_one("address", lambda _: 7),
        "address 100 KB": on_one("address", lambda _: "A" * 100_000),
        "value empty": set_value(lambda v: []),
        "value null": set_value(lambda v: None),
        "value 40 entries": set_value(lambda v: v * 2),
        "value ascending": set_value(lambda v: list(reversed(v))),
    }


def _vote_mutators() -> dict[str, Mutator]:
    def everyone(obj: Json) -> list[Json]:
        if not isinstance(obj, dict):
            return []
        return [
            e
            for key in ("current", "delinquent")
            for e in obj.get(key) or []
            if isinstance(e, dict)
        ]

    def on(field: str, value: Json, *, ours: bool = False) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            entries = everyone(obj)
            picked = [e for e in entries if e.get("votePubkey") == OUR_VOTE] if ours else entries
            if picked:
                rng.choice(picked)[field] = copy.deepcopy(value)
            return obj

        return mutate

    return {
        "activatedStake 10^30": on("activatedStake", 10**30),
        "activatedStake -1": on("activatedStake", -1),
        "lastVote 2^64 (watched)": on("lastVote", U64_OVER, ours=True),
        "lastVote 0 (watched)": on("lastVote", 0, ours=True),
        "rootSlot as string": on("rootSlot", "soon"),
        "votePubkey as number": on("votePubkey", 42),
        "nodePubkey null (watched)": on("nodePubkey", None, ours=True),
        "commission 500": on("commission", 500),
        "epochCredits garbage": on("epochCredits", [["a", None]]),
        "both lists empty": lambda obj, rng: {"current": [], "delinquent": []},
        "delinquent missing": lambda obj, rng: {"current": obj.get("current", [])},
        "current null": lambda obj, rng: {**obj, "current": None},
    }


def _node_mutators() -> dict[str, Mutator]:
    def on_watched(field: str, value: Json) -> Mutator:
        def mutate(obj: Json, rng: random.Random) -> Json:
            for node in obj if isinstance(obj, list) else []:
                if isinstance(node, dict) and node.get("pubkey") == DRIFT_NODE:
                    node[field] = copy.deepcopy(value)
            return obj

        return mutate

    def duplicate(obj: Json, rng: random.Random) -> Json:
        nodes = obj if isinstance(obj, list) else []
        twins = [
            {**n, "version": "1.0.0"}
            for n in nodes
            if isinstance(n, dict) and n.get("pubkey") == DRIFT_NODE
        ]
        return nodes + twins

    return {
        "version garbage (watched)": on_watched("version", "not.a.version"),
        "version 100 KB (watched)": on_watched("version", "2.3." + "9" * 100_000),
        "version 2^64.0.0 (watched)": on_watched("version", f"{U64_OVER}.0.0"),
        "version as number (watched)": on_watched("version", 236),
        "featureSet 2^64 (watched)": on_watched("featureSet", U64_OVER),
        "featureSet as string (watched)": on_watched("featureSet", "x"),
        "pubkey as number (watched)": on_watched("pubkey", 99),
        "list empty": lambda obj, rng: [],
        "node null": lambda obj, rng: [*(obj or []), None],
        "watched node twice, other version": duplicate,
    }


# Whole-answer garbage, any method: (name, fault kind, options or a result text).
_GENERIC_RESULTS: dict[str, Callable[[str], str]] = {
    "result null": lambda text: "null",
    "result a string": lambda text: '"ok"',
    "result 2^64": lambda text: str(U64_OVER),
    "result {}": lambda text: "{}",
    "result []": lambda text: "[]",
    "result nested 100000 deep": lambda text: "[" * 100_000 + "]" * 100_000,
    "result a 3 MB string": lambda text: '"' + "A" * 3_000_000 + '"',
    "result cut in half": lambda text: text[: len(text) // 2],
}
_GENERIC_HTTP: dict[str, tuple[str, dict[str, Any]]] = {
    "HTML page, HTTP 200": (
        "raw_http",
        {
            "status": 200,
            "content_type": "application/json",
            "body": "<html><body>Maintenance</body></html>",
        },
    ),
    "HTML page, HTTP 502": (
        "raw_http",
        {
            "status": 502,
            "content_type": "text/html",
            "body": "<html><body>Bad Gateway</body></html>",
        },
    ),
    "empty body, HTTP 200": ("raw_http", {"status": 200, "body": ""}),
    "answer with a wrong id": (
        "raw_http",
        {"status": 200, "body": '{"jsonrpc":"2.0","result":[],"id":987654321}'},
    ),
    "JSON cut in half": ("truncated_json", {}),
}


@dataclass
class Item:
    method: str
    name: str
    kind: str
    options: dict[str, Any]


def _rewrite(mutator: Mutator, seed: int, errors: Counter[str], name: str) -> Callable[[str], str]:
    def rewrite(text: str) -> str:
        try:
            return json.dumps(mutator(json.loads(text), random.Random(seed)), separators=(",", ":"))
        except Exception:  # a mutation that does not fit this answer: serve it unchanged
            errors[name] += 1
            return text

    return rewrite


def corpus(
    size: int,
    seed: int,
    stale_sigs: list[Json],
    stale_holders: dict[str, str],
    errors: Counter[str],
) -> list[Item]:
    """``size`` items, round-robin over the four methods; each method's every mutation comes
    once (in a seeded order) before any comes twice."""
    rng = random.Random(seed)
    specific = {
        SIGS: _signature_mutators(stale_sigs),
        HOLDERS: _holder_mutators(stale_holders),
        VOTES: _vote_mutators(),
        NODES: _node_mutators(),
    }

    def make(method: str, name: str) -> Item:
        if name in specific[method]:
            rewrite = _rewrite(specific[method][name], rng.randrange(2**32), errors, name)
            return Item(method, name, "rewrite_result", {"rewrite": rewrite})
        if name in _GENERIC_RESULTS:
            return Item(method, name, "rewrite_result", {"rewrite": _GENERIC_RESULTS[name]})
        kind, options = _GENERIC_HTTP[name]
        return Item(method, name, kind, dict(options))

    queues: dict[str, list[str]] = {}
    for method in METHODS:
        names = sorted([*specific[method], *_GENERIC_RESULTS, *_GENERIC_HTTP])
        queue: list[str] = []
        while len(queue) * len(METHODS) < size:
            queue += rng.sample(names, len(names))
        queues[method] = queue
    return [
        make(METHODS[i % len(METHODS)], queues[METHODS[i % len(METHODS)]][i // len(METHODS)])
        for i in range(size)
    ]


# -- the run -----------------------------------------------------------------------------------


def _polled_all(server: SimulatorServer, rounds: int) -> bool:
    return all(server.count(m) >= rounds for m in METHODS)


def _baseline_taken(server: SimulatorServer) -> bool:
    polled = {
        r.params[0]
        for r in server.requests
        if r.method == SIGS
        and isinstance(r.params, list)
        and len(r.params) > 1
        and isinstance(r.params[1], dict)
        and "until" in r.params[1]
    }
    return set(ADDRESSES) <= polled and _polled_all(server, 3)


def _text(note: dict[str, Any]) -> str:
    return f"{note.get('title', '')}\n{note.get('message', '')}"


def run(*, corpus_size: int, sweeps: int, seed: int, title: str) -> Table:
    ledger = _ledger(seed)
    table = Table(title)
    errors: Counter[str] = Counter()
    with (
        tempfile.TemporaryDirectory(prefix="watcher-fuzz-") as tmp,
        SimulatorServer(ledger, api_key=API_KEY) as server,
        Receiver() as receiver,
    ):
        folder = Path(tmp)
        config = write_config(
            folder, rpc_url=server.url, channels={"hooks": [receiver.url]}, rules=_rules()
        )
        database = folder / "state" / "watcher.db"
        daemon = DaemonProcess(config)
        crashes: list[str] = []

        def alive() -> None:
            assert daemon.proc is not None
            if daemon.proc.poll() is not None:
                crashes.append(f"exit {daemon.proc.returncode}: {daemon.output()[-1500:]}")
                daemon.start()

        def settle(rounds: int = 3) -> None:
            """All faults consumed, a few good polls of every method, the outbox empty."""
            wait_for(lambda: ledger.faults.pending() == 0, 20)
            target = {m: server.count(m) + rounds for m in METHODS}
            wait_for(lambda: all(server.count(m) >= target[m] for m in METHODS), 20)
            wait_for(lambda: outbox_pending(database) == 0, 20)

        daemon.start()
        if not wait_for(lambda: _baseline_taken(server), 60):
            daemon.kill()
            table.add("baseline taken", "no (timed out after 60 s)", fail=True)
            table.note(daemon.output()[-3000:])
            return table
        rss_start = rss_kb(daemon.proc.pid if daemon.proc else None)

        # Phase 0: answers to replay later, then real changes (notified, expected).
        stale_sigs = [
            e
            for a in ADDRESSES
            for e in json.loads(server.methods.answer(SIGS, [a, {"limit": 1000}]))
        ]
        stale_holders = {m: server.methods.answer(HOLDERS, [m]) for m in MINTS}
        ledger.tick(50)
        for address in ADDRESSES:
            ledger.add_transactions(address, 2)
        for mint in MINTS:
            account = HOLDER_KEYS[mint][3]
            ledger.set_holder_amount(mint, account, ledger.holder_amount(mint, account) * 3 // 2)
        ledger.tick(50)
        wait_for(lambda: len(receiver.received) >= len(ADDRESSES) + len(MINTS), 30)
        settle()
        before_fuzz = len(receiver.accepted)

        # Phase 1: the corpus, one garbage answer per method at a time.
        items = corpus(corpus_size, seed, stale_sigs, stale_holders, errors)
        served: list[tuple[int, Item]] = []  # (notifications accepted before it, item)
        unconsumed = 0
        fuzz_calls_before = server.count()
        for start in range(0, len(items), len(METHODS)):
            chunk = items[start : start + len(METHODS)]
            for item in chunk:
                ledger.faults.inject(item.kind, method=item.method, **item.options)
                served.append((len(receiver.accepted), item))
            if not wait_for(lambda: ledger.faults.pending() == 0, 20):
                unconsumed += ledger.faults.pending()
                ledger.faults.clear()
            good = {m: server.count(m) + 1 for m in METHODS}

            def polled_again(g: dict[str, int] = good) -> bool:
                return all(server.count(m) >= g[m] for m in METHODS)

            wait_for(polled_again, 10)
            alive()
        settle()
        fuzz_calls = server.count() - fuzz_calls_before
        false_alerts = [
            (i, body) for i, (body, _) in enumerate(receiver.accepted) if i >= before_fuzz
        ]
        after_fuzz = len(receiver.accepted)

        # Phase 2: a real change on every target; each must be notified within `sweeps` polls.
        changes: dict[str, Callable[[dict[str, Any]], bool]] = {}
        for address in ADDRESSES:
            [signature] = ledger.add_transactions(address, 1)

            def has_signature(note: dict[str, Any], s: str = signature) -> bool:
                return s in _text(note)

            changes[f"transaction on {address}"] = has_signature
        for mint in MINTS:
            account = HOLDER_KEYS[mint][5]
            ledger.set_holder_amount(mint, account, ledger.holder_amount(mint, account) * 3 // 2)

            def names_holder(note: dict[str, Any], a: str = account) -> bool:
                return "fuzz-holders" in note.get("title", "") and a in _text(note)

            changes[f"holder {account} of {mint}"] = names_holder
        ledger.mark_delinquent(OUR_VOTE)
        changes[f"validator {OUR_VOTE} delinquent"] = lambda note: (
            "my-validator" in note.get("title", "")
            and "RESOLVED" not in note.get("title", "").upper()
        )
        ledger.set_node(DRIFT_NODE, version="2.3.5")
        changes[f"node {DRIFT_NODE} on 2.3.5"] = lambda note: "drift" in note.get("title", "")
        per_method = {SIGS: len(ADDRESSES), HOLDERS: len(MINTS), VOTES: 1, NODES: 1}
        target = {m: server.count(m) + sweeps * n for m, n in per_method.items()}

        def notified() -> dict[str, bool]:
            notes = [body for body, _ in receiver.accepted[after_fuzz:]]
            return {name: any(match(n) for n in notes) for name, match in changes.items()}

        wait_for(
            lambda: all(notified().values()) or all(server.count(m) >= target[m] for m in METHODS),
            60,
        )
        wait_for(lambda: all(notified().values()), 3)  # in-flight deliveries
        alive()
        wedged = [name for name, ok in notified().items() if not ok]
        late = receiver.accepted[after_fuzz:]
        unexpected = [
            body for body, _ in late if not any(match(body) for match in changes.values())
        ]
        rss_end = rss_kb(daemon.proc.pid if daemon.proc else None)
        try:
            exit_code: int | str = daemon.stop(timeout=10)
        except AssertionError:
            exit_code = "did not stop in 10 s"
        leaks = key_leaks(folder, [body for body, _ in receiver.accepted])

    by_method = Counter(item.method for _, item in served)
    table.add("garbage answers served", len(served) - unconsumed)
    for method in METHODS:
        table.add(f"  {method}", by_method[method])
    table.add("  not consumed in time", unconsumed)
    table.add("good answers interleaved", max(0, fuzz_calls - len(served)))
    table.add("distinct mutations", len({(item.method, item.name) for _, item in served}))
    table.add("false alerts during the fuzz", len(false_alerts), fail=bool(false_alerts))
    table.add("false alerts after it", len(unexpected), fail=bool(unexpected))
    table.add(f"real changes after the fuzz (within {sweeps} sweeps)", len(changes))
    table.add("wedged targets", len(wedged), fail=bool(wedged))
    table.add("daemon crashes", len(crashes), fail=bool(crashes))
    table.add("clean stop exit code", exit_code, fail=exit_code != 0)
    if rss_start and rss_end:
        table.add("RSS start -> end (MiB)", f"{rss_start / 1024:.0f} -> {rss_end / 1024:.0f}")
    table.add("API key leaks", ", ".join(leaks) or 0, fail=bool(leaks))
    for name in wedged:
        table.note(f"wedged: {name}")
    if false_alerts:
        rules = Counter(
            re.sub(r"^\[\w+\] ([\w-]+):.*", r"\1", str(body.get("title")))
            for _, body in false_alerts
        )
        table.note(f"false alerts by rule: {dict(rules)}")
    for index, body in false_alerts[:15]:
        near = [f"{item.method}: {item.name}" for seen, item in served if seen <= index][-8:]
        table.note(
            f"false alert: {body.get('title')!r}\n"
            f"    the 8 garbage answers served just before: {near}"
        )
    for body in unexpected[:5]:
        table.note(f"false alert after the fuzz: {body.get('title')!r}")
    for text in crashes[:3]:
        table.note(f"crash: {text}")
    if errors:
        table.note(f"mutations that did not fit their answer (served unchanged): {dict(errors)}")
    return table
