"""Logging: structlog for our code and stdlib logging for libraries, one redacting pipeline.

JSON lines when stderr is not a terminal (systemd, Docker), a readable console format on one.
Every rendered line goes through the redactor last, so a secret (the API key in the RPC URL's
path, tokens in channel URLs) cannot leak whatever a library or an exception puts in a message.
Tracebacks are rendered without frame locals: a truncated secret in a local would slip past.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from watcher.core.redact import REDACTOR

LogFormat = Literal["auto", "json", "console"]

# Libraries that log full URLs (httpx: encode/httpx#2760) or chat at INFO.
_QUIET_LIBRARIES = ("httpx", "httpcore", "apprise", "apscheduler", "asyncio", "mail.log")


def _redact_rendered(_logger: WrappedLogger, _name: str, event: Any) -> Any:
    # Last processor: runs on the final string, so nothing rendered before it can leak a secret.
    if isinstance(event, str):
        return REDACTOR.redact(event)
    if isinstance(event, bytes):
        return REDACTOR.redact(event.decode("utf-8", "replace")).encode()
    return event


# syslog priorities (sd-daemon(3)): journald reads a "<N>" prefix on each line as the line's level.
_PRIORITY = {"critical": 2, "error": 3, "warning": 4, "info": 6, "debug": 7}


def _writes_to_journal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """systemd sets JOURNAL_STREAM=DEV:INODE to the stream it connected to the journal."""
    expected = environ.get("JOURNAL_STREAM")
    if not expected:
        return False
    try:
        stat = os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return expected == f"{stat.st_dev}:{stat.st_ino}"


def _with_priority(renderer: Processor) -> Processor:
    def render(logger: WrappedLogger, name: str, event_dict: EventDict) -> Any:
        priority = _PRIORITY.get(str(event_dict.get("level", "info")), 6)
        line = renderer(logger, name, event_dict)
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        return f"<{priority}>{line}"

    return render


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure(
    level: str = "info",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Set up structlog and stdlib logging once, at start-up of a command."""
    stream = stream or sys.stderr
    environ = os.environ if environ is None else environ
    as_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    renderer: Processor
    if as_json:
        renderer = structlog.processors.JSONRenderer()
        exceptions: list[Processor] = [
            structlog.processors.ExceptionRenderer(
                ExceptionDictTransformer(show_locals=False, use_rich=False)
            )
        ]
    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=stream.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
        exceptions = []
    if _writes_to_journal(stream, environ):
        renderer = _with_priority(renderer)

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared_processors(),
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *exceptions,
            renderer,
            _redact_rendered,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)

    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
