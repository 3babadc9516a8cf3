"""Logging: structlog for our code and stdlib logging for libraries, one redacting pipeline.

JSON lines when stderr is not a terminal (systemd, Docker), a readable console format on one.
Every rendered line goes through the redactor last, so a secret (the API key in the RPC URL's
path, tokens in channel URLs) cannot leak whatever a library or an exception puts in a message.
Tracebacks are rendered without frame locals: a truncated secret in a local would slip past.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from watcher.redact import REDACTOR

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


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure(
    level: str = "info", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    """Set up structlog and stdlib logging once, at start-up of a command."""
    stream = stream or sys.stderr
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


def drop_secrets(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Processor for callers that build their own chains: redact every string value."""
    return {
        key: REDACTOR.redact(value) if isinstance(value, str) else value
        for key, value in event_dict.items()
    }
