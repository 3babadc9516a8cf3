"""Markdown for the channels that render it, plain text for the others.

Messages are worded once, as plain text that reads well as it is (``watcher.alerting.messages``):
a key in a body is followed by a line holding only its explorer link (indented), a list item
starts with ``- ``. Channels that render Markdown (Slack, Telegram, Discord, and email, which
Apprise turns into HTML) get the same text as Markdown, decided per Apprise schema
(``MARKDOWN_SCHEMES``): each link line becomes a link on the key above it (a signature's text
shortened to its first and last 8 characters, the link keeping the full value), other URLs
become links, and everything else is escaped so that it shows exactly as written. Every other
channel (webhooks, PagerDuty, the console...) gets the plain text.

Pure: text in, text out.
"""

from __future__ import annotations

import re

# Schemas whose services render Markdown (or, for email, HTML made from it by Apprise).
MARKDOWN_SCHEMES = frozenset({"slack", "tgram", "discord", "mailto", "mailtos"})

_URL = re.compile(r"https?://[^\s<>]+")
_LINK_LINE = re.compile(r"^\s+(https?://[^\s<>]+)$")
_B58 = "1-9A-HJ-NP-Za-km-z"
# A key in full, or shortened (``5VERv8NM…diSZkQUW``, ``9xQe…VFin``).
_KEY = re.compile(rf"[{_B58}]{{32,88}}|[{_B58}]{{4,8}}…[{_B58}]{{4,8}}")
# CommonMark's specials that plain text may hold; "-" only starts a list (kept: our lists).
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
SIGNATURE_CHARS = 64  # longer keys are signatures: shown shortened (the link has them in full)
SHOWN_CHARS = 8


def renders_markdown(url: str) -> bool:
    """Whether the service behind an Apprise URL shows Markdown (decided by its schema)."""
    return url.split("://", 1)[0].lower() in MARKDOWN_SCHEMES


def escape(text: str) -> str:
    """Text shown exactly as written in Markdown (URLs in it become links)."""
    parts: list[str] = []
    last = 0
    for match in _URL.finditer(text):
        parts.append(_SPECIAL.sub(r"\\\1", text[last : match.start()]))
        parts.append(f"<{match.group(0)}>")
        last = match.end()
    parts.append(_SPECIAL.sub(r"\\\1", text[last:]))
    return "".join(parts)


def to_markdown(body: str) -> str:
    """A plain body as Markdown: each link line joined to the key above it as a link."""
    out: list[str] = []
    pending: str | None = None  # the previous plain line, not written yet
    for line in body.split("\n"):
        link = _LINK_LINE.match(line)
        if link is not None and pending is not None:
            out.append(_linked(pending, link.group(1)))
            pending = None
            continue
        if pending is not None:
            out.append(escape(pending))
        if out and out[-1].lstrip().startswith("- ") and line and not line.startswith(("- ", " ")):
            out.append("")  # a line after a list is not part of its last item
        pending = line
    if pending is not None:
        out.append(escape(pending))
    return "\n".join(out)


def _linked(line: str, url: str) -> str:
    """``line`` with the key its link is about as the link's text (escaped around it)."""
    for match in _KEY.finditer(line):
        key = match.group(0)
        if _names(key, url):
            text = key
            if len(key) > SIGNATURE_CHARS:
                text = f"{key[:SHOWN_CHARS]}…{key[-SHOWN_CHARS:]}"
            before, after = line[: match.start()], line[match.end() :]
            return f"{escape(before)}[{text}]({url}){escape(after)}"
    return f"{escape(line)}\n<{url}>"


def _names(key: str, url: str) -> bool:
    """Whether the link is about ``key`` (in full, or shortened: its two ends)."""
    if "…" not in key:
        return key in url
    start, end = key.split("…")
    return any(
        full.startswith(start) and full.endswith(end)
        for full in re.findall(rf"[{_B58}]{{32,88}}", url)
    )
