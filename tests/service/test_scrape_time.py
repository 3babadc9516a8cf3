"""``watcher_alert_firing`` as a scrape shows it: one series per firing state alert, a silenced
one kept and labelled ``silenced="true"`` (its dashboard panel still lists it; a rule paging on
it leaves it out with ``silenced="false"``)."""

from __future__ import annotations

import pytest

from watcher.core.events import Silence
from watcher.service.metrics import Metrics, StateSummary
from watcher.service.scrape_time import ScrapeReads
from watcher.state.snapshot import Awaiting, Firing, Outbox

NOW = 1_800_000_000.0
FIRING = [
    Firing("my-validator", "VoteA", "critical", "title A", NOW - 60),
    Firing("my-validator", "VoteB", "critical", "title B", NOW - 60),
    Firing("drift", "NodeC", "warning", "title C", NOW - 60),
]


def silence(subject: str | None, *, expired_at: float | None = None) -> Silence:
    return Silence(
        1, "my-validator", subject, NOW - 10, NOW + 3600, "upgrade", "alice", NOW - 10, expired_at
    )


async def firing_series(silences: list[Silence]) -> set[str]:
    async def summary() -> StateSummary:
        return FIRING, Outbox(0, None, 0)

    async def active_silences(now: float) -> list[Silence]:
        return silences

    metrics = Metrics(
        lambda: NOW,
        ScrapeReads(
            read_state=summary,
            read_silences=active_silences,
            kind_of=lambda rule: {"my-validator": "delinquent_validators"}.get(
                rule, "version_drift"
            ),
        ),
    )
    await metrics.refresh()
    return {
        line
        for line in metrics.exposition().decode().splitlines()
        if line.startswith("watcher_alert_firing{")
    }


def line(rule: str, kind: str, severity: str, silenced: str, subject: str) -> str:
    return (
        f'watcher_alert_firing{{kind="{kind}",rule="{rule}",severity="{severity}",'
        f'silenced="{silenced}",subject="{subject}"}} 1.0'
    )


@pytest.mark.parametrize(
    ("silences", "silenced"),
    [
        ([], set()),
        ([silence("VoteA")], {"VoteA"}),
        ([silence(None)], {"VoteA", "VoteB"}),  # every subject of the rule
        ([silence(None, expired_at=NOW - 1)], set()),  # expired by hand
    ],
)
async def test_a_silenced_firing_alert_keeps_its_series_labelled_silenced(
    silences: list[Silence], silenced: set[str]
) -> None:
    def mine(subject: str) -> str:
        flag = "true" if subject in silenced else "false"
        return line("my-validator", "delinquent_validators", "critical", flag, subject)

    assert await firing_series(silences) == {
        mine("VoteA"),
        mine("VoteB"),
        line("drift", "version_drift", "warning", "false", "NodeC"),
    }


async def test_the_targets_awaiting_their_first_poll_are_read_at_most_every_ten_seconds() -> None:
    clock = [NOW]
    reads: list[float] = []
    waiting = [Awaiting("signatures", 1000, NOW - 90)]

    async def awaiting() -> list[Awaiting]:
        reads.append(clock[0])
        return list(waiting)

    metrics = Metrics(lambda: clock[0], ScrapeReads(read_awaiting=awaiting))

    async def shown() -> list[str]:
        await metrics.refresh()
        return [
            line
            for line in metrics.exposition().decode().splitlines()
            if line.startswith(("watcher_targets_awaiting", "watcher_first_poll"))
        ]

    assert await shown() == [
        'watcher_targets_awaiting_first_poll{source="signatures"} 1000.0',
        'watcher_first_poll_oldest_wait_seconds{source="signatures"} 90.0',
    ]
    clock[0] += 5
    waiting.clear()  # every one polled meanwhile: seen at the next read, not before
    assert (await shown())[1] == 'watcher_first_poll_oldest_wait_seconds{source="signatures"} 95.0'
    clock[0] += 5
    assert await shown() == []
    assert reads == [NOW, NOW + 10]
