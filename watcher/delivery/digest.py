"""Noise control for event alerts (digests and their pace), and the dead letters: which given-up
deliveries are reported, and their wording.

Event rules (new_transactions, holder_changes) carry a ``Grouping``; their alerts are gathered
per rule and destination URL, as in Alertmanager:

- the first pending alert of a group waits ``group_wait`` for company, then everything pending
  goes out as ONE message: a digest (a lone alert goes out as it is);
- after a message, the group sends again at most once per ``group_interval``;
- with ``max_per_hour``, at most that many messages per rolling hour: what comes in meanwhile
  waits and goes out together in the next message. Nothing is dropped, only gathered.

State alerts (firing, resolved, repeat) have no grouping: never delayed, never capped.

A digest counts its alerts in their kind's words (``watcher.kinds.digest_words``) and lists
its first ``DIGEST_ITEMS`` alerts by the titles they were given when stored
(``watcher.kinds.word``), each with its subject named under it in full (``Account: <key>``;
``DigestWords.subject_named``), with its label and explorer link as a lone alert shows it; then
"... and K more" (alerts). A kind that names things (``DigestWords.names``: a transaction's
signatures) also has them listed under each title, each shortened with its explorer link
carrying it in full, until ``DIGEST_NAMED`` are named, then "... and N more" (its items). The
rule's summary and runbook frame it (``watcher.alerting.messages.framed``).
A resolution goes out in the "resolved" tone (Apprise's success type, ``tone_of``).

A delivery given up (``delivery.deadline``) is a dead letter: reported by an alert of its own
to ``fallback_channels`` (``letters``: which are, and their texts); a dead letter that dies in
turn is only logged (no loop), as is one with no fallback URL but the one that failed.

Pure: rows and times in, texts and times out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watcher.alerting.formatting import PLAIN, Presentation, lines
from watcher.alerting.messages import framed, rule_head, with_notes
from watcher.core.clock import iso
from watcher.core.events import AlertMessage, Grouping, Severity
from watcher.core.outbox_rows import DeliveryRow, Destination
from watcher.delivery.notifier import Tone
from watcher.kinds import digest_words
from watcher.kinds.base import DigestWords, Named

HOUR = 3600.0
# A digest lists this many of its alerts, each naming its subject, then "... and K more":
# at most this many subjects (accounts, mints...) are named, whatever the kind.
DIGEST_ITEMS = 10
DIGEST_NAMED = 20  # a digest names this many items (signatures...), then "... and N more"

DEAD_LETTER_RULE = "watcher"
DEAD_LETTER_KIND = "dead_letter"
DEAD_LETTER_PREFIX = "dead|"
# Many deliveries die together when a channel is down for a day: one digest a minute at most.
DEAD_LETTER_GROUPING = Grouping(kind=DEAD_LETTER_KIND, wait=2.0, interval=60.0)

_SEVERITY_RANK: Mapping[Severity, int] = {"info": 0, "warning": 1, "critical": 2}


# -- wording --------------------------------------------------------------------------------


def _one(facts: Mapping[str, Any]) -> int:
    return 1


def _dead_letter_line(facts: Mapping[str, Any]) -> str:
    return f"{facts['original_title']} (to {facts['channel']}, URL id {facts['url_id']})"


# Each event kind's words are its own (``watcher.kinds.digest_words``); dead letters have theirs.
def _no_subject(facts: Mapping[str, Any]) -> Named | None:
    return None  # a dead letter's line names its rule (in the title it quotes)


DEAD_LETTER_WORDS = DigestWords(
    ("undeliverable notification", "undeliverable notifications"),
    ("rule", "rules"),
    _one,
    _dead_letter_line,
    subject_named=_no_subject,
)
GENERIC_WORDS = DigestWords(("event", "events"), ("subject", "subjects"), _one)


def words_of(kind: str) -> DigestWords:
    """How a digest of ``kind``'s alerts counts."""
    if kind == DEAD_LETTER_KIND:
        return DEAD_LETTER_WORDS
    return digest_words(kind) or GENERIC_WORDS


def _counted(count: int, forms: tuple[str, str]) -> str:
    return f"{count} {forms[0] if count == 1 else forms[1]}"


def _head(row: DeliveryRow, severity: str | None = None) -> str:
    return rule_head({"severity": severity or row.alert.severity, "rule": row.alert.rule})


def severity_of(rows: Sequence[DeliveryRow]) -> Severity:
    """The highest severity among the rows (one rule's rows share it, unless it was edited)."""
    return max((row.alert.severity for row in rows), key=lambda s: _SEVERITY_RANK.get(s, 0))


def tone_of(rows: Sequence[DeliveryRow]) -> Tone:
    """How the message looks: "resolved" (Apprise's success type) for resolutions, else the
    highest severity."""
    if all(row.alert.reason == "resolved" for row in rows):
        return "resolved"
    return severity_of(rows)


def message_text(
    rows: Sequence[DeliveryRow], notes: Sequence[str] = (), shown: Presentation = PLAIN
) -> tuple[str, str]:
    """Title and body of one message for ``rows``: a lone row as it is, several as a digest;
    ``notes`` (from ``pacing_notes``) are added to the body (before the rule's runbook)."""
    if len(rows) == 1:
        row = rows[0]
        return row.alert.title, with_notes(row.alert.body, row.alert.facts, notes)
    return digest_text(rows, notes, shown)


def digest_text(
    rows: Sequence[DeliveryRow], notes: Sequence[str] = (), shown: Presentation = PLAIN
) -> tuple[str, str]:
    """``[WARNING] treasury: 200 new transactions (50 addresses)``; the body counts, then lists
    its first ``DIGEST_ITEMS`` alerts by their titles, each with its subject named under it
    (``shown``: labels, explorer links), and for a kind that names items (signatures...) those
    too, up to ``DIGEST_NAMED``; then "... and N more". Between the rule's summary and runbook
    (of its newest row: the rule as it is now)."""
    first = rows[0]
    words = words_of(first.alert.grouping.kind if first.alert.grouping else "")
    severity = severity_of(rows)
    count = sum(words.count(row.alert.facts) for row in rows)
    subjects = len({row.alert.subject for row in rows})
    started, ended = min(r.created_at for r in rows), max(r.created_at for r in rows)
    span = f"at {iso(started)}" if ended == started else f"from {iso(started)} to {iso(ended)}"
    title = f"{_head(first, severity)} {_counted(count, words.item)} "
    title += f"({_counted(subjects, words.subject)})"
    body = lines(
        f"Rule: {first.alert.rule} (severity {severity})",
        f"{_counted(count, words.item)} in {_counted(len(rows), ('notification', 'notifications'))}"
        f" on {_counted(subjects, words.subject)}, queued {span}.",
        *notes,
        "",
        *_listed_lines(rows, words, count, shown),
    )
    newest = max(rows, key=lambda row: row.id)
    return title, framed(body, newest.alert.facts)


def _listed_lines(
    rows: Sequence[DeliveryRow], words: DigestWords, count: int, shown: Presentation
) -> list[str]:
    """Each alert by its title (``- 2 new transactions on 9xQe…VFin``), its subject under it
    (``  - Address: 9xQeWvG8…Hy9uVFin``, then its link), then the items it names
    (``  - 5VERv8NM…tH3SPzj9, slot 7``, then its link); up to ``DIGEST_ITEMS`` alerts and
    ``DIGEST_NAMED`` items. Then how many more: items for a kind that names them, else
    alerts."""
    listed: list[str] = []
    named = 0
    shown_rows = 0
    for row in rows:
        if shown_rows == DIGEST_ITEMS or (words.names is not None and named == DIGEST_NAMED):
            break
        shown_rows += 1
        listed.append(f"- {_item(row, words)}")
        subject = _subject_of(row, words)
        if subject is not None:
            noun = subject.noun or words.subject[0][:1].upper() + words.subject[0][1:]
            listed += _named(f"{noun}: ", subject, shown)
        if words.names is not None:
            for item in words.names(row.alert.facts)[: DIGEST_NAMED - named]:
                named += 1
                listed += _named("", item, shown)
    more = count - named if words.names is not None else len(rows) - shown_rows
    return listed + ([f"... and {more} more"] if more > 0 else [])


def _subject_of(row: DeliveryRow, words: DigestWords) -> Named | None:
    if words.subject_named is not None:
        return words.subject_named(row.alert.facts)
    # An unknown kind's subject may be anything: named as it is, without a link.
    return Named(row.alert.subject, "" if words is GENERIC_WORDS else "address")


def _named(prefix: str, item: Named, shown: Presentation) -> list[str]:
    """One named thing under an alert's title, and its link line if any."""
    detail = f", {item.detail}" if item.detail else ""
    text = shown.listed(item.link, item.key, *item.aliases)
    link = shown.link(item.link, item.key)
    return [f"  - {prefix}{text}{detail}"] + (["  " + link] if link else [])


def _item(row: DeliveryRow, words: DigestWords) -> str:
    """An alert's title without the ``[SEVERITY] rule:`` the digest's title already says."""
    if words.line is not None:
        return words.line(row.alert.facts)
    head = _head(row)
    title: str = row.alert.title
    return title[len(head) :].strip() if title.startswith(head) else title


# -- pace -----------------------------------------------------------------------------------


def release_at(grouping: Grouping, first_queued: float, sent: Sequence[float]) -> float:
    """When a group's pending alerts may go out: ``wait`` after the first of them was queued,
    ``interval`` after the group's last message, and with ``max_per_hour`` not before the
    oldest of its last ``max_per_hour`` messages is an hour old. ``sent``: when its recent
    messages went out (at least those of the last hour and the latest one)."""
    at = first_queued + grouping.wait
    if sent:
        at = max(at, max(sent) + grouping.interval)
    cap = grouping.max_per_hour
    if cap is not None and len(sent) >= cap:
        at = max(at, sorted(sent)[-cap] + HOUR)
    return at


def pacing_notes(
    grouping: Grouping, first_queued: float, sent: Sequence[float], now: float
) -> list[str]:
    """What a message sent at ``now`` says about ``max_per_hour``: that it was held back by
    it, and that it uses the hour's last slot (with when the next may go)."""
    cap = grouping.max_per_hour
    if cap is None:
        return []
    notes = []
    uncapped = Grouping(grouping.kind, grouping.wait, grouping.interval)
    if release_at(grouping, first_queued, sent) > release_at(uncapped, first_queued, sent):
        notes.append(f"Held back by max_per_hour ({cap}): gathered since {iso(first_queued)}.")
    recent = sorted([t for t in sent if t > now - HOUR] + [now])
    if len(recent) >= cap:
        notes.append(
            f"max_per_hour reached ({cap} messages in the last hour): further events of this "
            f"rule wait and go out together, not before {iso(recent[-cap] + HOUR)}."
        )
    return notes


def batches(rows: Sequence[DeliveryRow]) -> list[list[DeliveryRow]]:
    """Claimed rows as messages: the rows of one digest group (``group_key`` and URL)
    together, every other row alone; in the order of each message's first row."""
    messages: list[list[DeliveryRow]] = []
    groups: dict[tuple[str, str], list[DeliveryRow]] = {}
    for row in sorted(rows, key=lambda r: r.id):
        if row.group_key is None:
            messages.append([row])
            continue
        key = (row.group_key, row.url_id)
        if key not in groups:
            groups[key] = []
            messages.append(groups[key])
        groups[key].append(row)
    return messages


# -- dead letters ---------------------------------------------------------------------------


def is_dead_letter(row: DeliveryRow) -> bool:
    """Whether the row carries a dead letter (whose own death is not reported again)."""
    alert = row.alert
    return alert.rule == DEAD_LETTER_RULE and alert.dedup_key.startswith(DEAD_LETTER_PREFIX)


def dead_letter(
    row: DeliveryRow, error: str, *, channels: Sequence[str], now: float
) -> AlertMessage:
    """The alert reporting that ``row`` was given up: names its rule, title, channel and
    url_id (never the URL) and the last error."""
    attempts = row.attempts + 1
    facts: dict[str, Any] = {
        "rule": DEAD_LETTER_RULE,
        "severity": "warning",
        "subject": row.alert.rule,
        "reason": "event",
        "delivery_id": row.id,
        "original_rule": row.alert.rule,
        "original_title": row.alert.title,
        "channel": row.channel,
        "url_id": row.url_id,
        "attempts": attempts,
        "queued_at": iso(row.created_at),
        "error": error,
    }
    body = lines(
        f"A notification of rule {row.alert.rule} could not be delivered and was given up.",
        f"Notification: {row.alert.title}",
        f"Channel: {row.channel} (URL id {row.url_id})",
        f"Queued at {iso(row.created_at)}, given up at {iso(now)} after "
        f"{_counted(attempts, ('attempt', 'attempts'))}.",
        f"Last error: {error}",
        "It stays in the history (watcher alerts), marked dead.",
    )
    return AlertMessage(
        rule=DEAD_LETTER_RULE,
        severity="warning",
        subject=row.alert.rule,
        reason="event",
        dedup_key=f"{DEAD_LETTER_PREFIX}{row.id}",
        title=f"[WARNING] {DEAD_LETTER_RULE}: notification undeliverable",
        body=body,
        channels=tuple(channels),
        facts=facts,
        grouping=DEAD_LETTER_GROUPING,
    )


def letters(
    rows: Sequence[DeliveryRow],
    error: str,
    fallback_channels: Sequence[str],
    now: float,
    elsewhere: Callable[[AlertMessage], Sequence[Destination]],
) -> dict[int, AlertMessage]:
    """The dead letter of each row (by delivery id) that has somewhere to go: never one for a
    dead letter itself, nor one with no URL but the failed one (``elsewhere``)."""
    reports: dict[int, AlertMessage] = {}
    for row in rows:
        if is_dead_letter(row):
            continue
        letter = dead_letter(row, error, channels=fallback_channels, now=now)
        if elsewhere(letter):
            reports[row.id] = letter
    return reports
