"""A watch begins when it is asked for, at full size: `watcher run` over 2,000 addresses whose
first polls are paced at `rpc.budget` 1728000/day (20 calls a second: about 100 s to baseline
them all), against the simulator in this process.

Transactions land before the start (never to be notified), on addresses not polled yet while
the first sweep is paced, while the daemon is down after a `kill -9` in the middle of that
sweep, after the first polls, and, after a reload that adds 200 addresses, on those not polled
yet. It prints how many were made after their watch began, how many the alert history lists
(once each), how many made before it were notified (target 0), and how long the first sweep
took. Exit 1 when a target fails. `make watch-began` (about 3 minutes)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, alert_history, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

API_KEY = "bench-key"


def rule(addresses: list[str]) -> dict[str, Any]:
    return {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": addresses,
        "every": "1s",
        "max_every": "60s",
        "notify": ["hooks"],
    }


def run(size: int, added_size: int, budget: str) -> bool:
    addresses = [derived_pubkey(f"bench watch-began {n}") for n in range(size)]
    added = [derived_pubkey(f"bench watch-began added {n}") for n in range(added_size)]
    ledger = Ledger(seed=35)
    before: list[str] = []
    after: list[str] = []
    with (
        SimulatorServer(ledger, api_key=API_KEY) as server,
        JsonReceiver() as receiver,
        tempfile.TemporaryDirectory() as folder,
    ):

        def not_polled(targets: list[str]) -> list[str]:
            polled = {
                request.params[0]
                for request in list(server.requests)
                if request.method == "getSignaturesForAddress"
            }
            return [address for address in targets if address not in polled]

        for address in addresses[::20]:
            before += ledger.add_transactions(address, 2)
        made = time.time()
        wait_until(lambda: int(time.time()) > int(made), 3, "the next second")
        config = write_config(
            Path(folder),
            rpc_url=server.url,
            channels={"hooks": [receiver.url]},
            rules=[rule(addresses)],
            extra={"rpc": {"batch_size": 10, "budget": budget}, "log_level": "warning"},
        )
        daemon = DaemonProcess(config)
        started = time.monotonic()
        try:
            daemon.start()
            wait_until(lambda: server.requests, 30, "the first poll")
            window: list[str] = []
            # While the first sweep is paced: 60 events on idle addresses not polled yet.
            for address in not_polled(addresses)[-60:][::-1]:
                after += ledger.add_transactions(address, 1)
                window.append(address)
                time.sleep(0.5)  # spread over 30 s, as deposits come
                if len(not_polled(addresses)) < size // 2:
                    break
            wait_until(lambda: len(not_polled(addresses)) < size // 2, 120, "half polled")
            daemon.kill()  # kill -9 in the middle of the first sweep
            for address in not_polled(addresses)[-40:]:
                after += ledger.add_transactions(address, 1)
            daemon.start()
            wait_until(lambda: not not_polled(addresses), 300, "every first poll")
            first_sweep = time.monotonic() - started
            for address in addresses[1:400:20]:
                after += ledger.add_transactions(address, 1)
            for address in added:
                before += ledger.add_transactions(address, 1)
            made = time.time()
            wait_until(lambda: int(time.time()) > int(made), 3, "the next second")
            rules_file = Path(folder) / "rules" / "rules.yaml"
            rules_file.write_text(yaml.safe_dump({"rules": [rule(addresses + added)]}))
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGHUP)
            late = []
            for address in not_polled(added)[-40:]:
                after += ledger.add_transactions(address, 1)
                late.append(address)

            def history() -> list[dict[str, Any]]:
                return alert_history(config)

            def listed(alerts: list[dict[str, Any]]) -> Counter[str]:
                return Counter(s["signature"] for a in alerts for s in a["facts"]["signatures"])

            wait_until(lambda: set(after) <= set(listed(history())), 300, "every alert")
            code = daemon.stop()
        finally:
            daemon.kill()
        seen = listed(history())
    notified_after = sum(1 for signature in after if seen[signature] >= 1)
    twice = sum(1 for signature in after if seen[signature] > 1)
    notified_before = sum(1 for signature in before if seen[signature])
    print(f"addresses: {size} at first, {added_size} added by a reload; budget {budget}")
    print(f"first sweep (with a kill -9 in it): {first_sweep:.0f} s")
    print(f"events: {len(window)} waiting, 40 while down, 20 after, {len(late)} after the reload")
    results = [
        ("made after their watch began, notified", notified_after, len(after)),
        ("notified more than once", twice, 0),
        ("made before their watch began, notified", notified_before, 0),
        ("exit code of the stop", code, 0),
    ]
    ok = True
    for label, got, want in results:
        passed = got == want
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'}  {label}: {got} (target {want})")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--added", type=int, default=200)
    parser.add_argument("--budget", default="1728000/day")
    args = parser.parse_args()
    sys.exit(0 if run(args.size, args.added, args.budget) else 1)


if __name__ == "__main__":
    main()
