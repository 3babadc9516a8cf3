"""A rule's own ``title`` / ``body``: Jinja2 templates over the alert's facts, compiled once
and rendered in a sandbox (undefined names fail). Their filters: ``short``, ``duration``,
``iso``, ``amount``, and ``named`` / ``explorer``, which show a key as the ``Presentation``
given to ``rendered`` does."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, pass_context
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from watcher.alerting.formatting import PLAIN, Presentation, shorten, ui_amount
from watcher.core.clock import human_duration, iso

_PRESENTATION = "_presentation"  # where templates' filters find the presentation


@pass_context
def _named_filter(context: Context, key: str) -> str:
    shown = context.get(_PRESENTATION, PLAIN)
    return shown.name(key) if isinstance(shown, Presentation) else key


@pass_context
def _explorer_filter(context: Context, key: str, kind: str = "address") -> str:
    shown = context.get(_PRESENTATION, PLAIN)
    line = shown.link(kind, key) if isinstance(shown, Presentation) else None
    return line.strip() if line else ""


@functools.cache
def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(autoescape=False, undefined=StrictUndefined)
    env.filters.update(short=shorten, duration=human_duration, iso=iso, amount=ui_amount)
    env.filters.update(named=_named_filter, explorer=_explorer_filter)
    return env


@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> Template:
    return _environment().from_string(source)


def template_problem(source: str) -> str | None:
    """Why a rule's template cannot be compiled, or None (for ``watcher check``)."""
    try:
        _compiled(source)
    except TemplateError as exc:
        return f"template error: {exc}"
    return None


def rendered(source: str, facts: Mapping[str, Any], shown: Presentation) -> str:
    """``source`` rendered over ``facts``, its key filters showing keys as ``shown`` does;
    raises whatever the template raises (``TemplateError``, ``TypeError``...)."""
    return _compiled(source).render({**facts, _PRESENTATION: shown})
