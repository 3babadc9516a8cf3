"""The ledger simulator: a scripted fake cluster served over real HTTP JSON-RPC on loopback.

For tests::

    ledger = Ledger.from_mainnet()
    with SimulatorServer(ledger) as server:   # server.url == "http://127.0.0.1:PORT/v3/sim-key"
        ledger.add_transactions(address, 25)
        ledger.faults.inject("http_429", method="getSignaturesForAddress")
        transfer(ledger, source, destination, 10**9)   # watcher.simulator.transfers: 1 SOL
        ledger.faults.inject("http_503_html", for_seconds=30)

For people: ``serve(port, scenario_name)`` (``watcher simulate``).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TextIO

from watcher.simulator.faults import FAULT_KINDS, FaultPlan
from watcher.simulator.ledger import Ledger
from watcher.simulator.limits import NO_LIMITS, ProviderLimits
from watcher.simulator.request_log import RecordedRequest
from watcher.simulator.scenarios import (
    DEMO,
    SCENARIOS,
    DemoCast,
    Scenario,
    Step,
    run_scenario,
)
from watcher.simulator.server import SimulatorServer
from watcher.simulator.validators import KEEP

__all__ = [
    "DEMO",
    "FAULT_KINDS",
    "KEEP",
    "SCENARIOS",
    "DemoCast",
    "FaultPlan",
    "Ledger",
    "ProviderLimits",
    "RecordedRequest",
    "Scenario",
    "SimulatorServer",
    "Step",
    "run_scenario",
    "serve",
]


def serve(
    port: int = 8899,
    scenario_name: str = "demo",
    api_key: str = "sim-key",
    *,
    host: str = "127.0.0.1",
    speed: float = 1.0,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
    ledger: Ledger | None = None,
    control: Callable[[Ledger, Any], str] | None = None,
    limits: ProviderLimits = NO_LIMITS,
) -> int:
    """Serves the scenario's ledger (or ``ledger``, with no scenario played) until Ctrl-C,
    SIGTERM or ``stop``; returns the exit code (0).

    Prints the RPC URL to use, then each scenario step as it happens, and each change made
    through ``control`` (``POST /control``: ``control(ledger, body)`` applies it and says what
    it did). The ledger's slot follows the wall clock (``Ledger.follow_wall_clock``). Raises
    ``ValueError`` for an unknown scenario and ``OSError`` when the port is
    taken. ``limits``: the provider's, as ``SimulatorServer`` takes them.
    """
    if scenario_name not in SCENARIOS:
        raise ValueError(
            f"unknown scenario {scenario_name!r}; known: {', '.join(sorted(SCENARIOS))}"
        )
    stream = out if out is not None else sys.stdout
    given = ledger is not None
    scenario = SCENARIOS["quiet" if given else scenario_name]
    if ledger is None:
        ledger = scenario.new_ledger()
    # A person's simulator: its slots follow the wall clock (a restart answers no older slot),
    # so the scenario ticks none of its own.
    ledger.follow_wall_clock()
    served = ledger
    stopped = stop if stop is not None else threading.Event()

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=stream, flush=True)

    def changed(body: Any) -> str:
        assert control is not None
        done = control(served, body)
        say(f"changed: {done}")
        return done

    with SimulatorServer(
        ledger,
        host=host,
        port=port,
        api_key=api_key,
        control=None if control is None else changed,
        limits=limits,
    ) as server:
        say(f"ledger simulator serving {server.url}")
        if control is not None:
            say(f"control: POST http://{host}:{server.port}/control (watcher simulate tx ...)")
        if given:
            say("no scenario: the ledger changes only when told to")
        else:
            say(f"scenario {scenario.name}: {scenario.summary}")
        restore = _stop_on_sigterm(stopped)
        try:
            player = run_scenario(
                ledger,
                scenario,
                stop=stopped,
                speed=speed,
                on_step=lambda step: say(f"scenario: {step.description}"),
                slot_seconds=None,
            )
            announced = given  # no scenario: nothing to announce
            while not stopped.wait(0.2):
                if not announced and not player.is_alive():
                    say("scenario complete; still serving (Ctrl-C to stop)")
                    announced = True
        except KeyboardInterrupt:
            pass
        finally:
            stopped.set()
            restore()
    say("ledger simulator stopped")
    return 0


def _stop_on_sigterm(stopped: threading.Event) -> Callable[[], None]:
    """SIGTERM sets ``stopped`` (only the main thread may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    signal.signal(signal.SIGTERM, on_sigterm)
    return restore
