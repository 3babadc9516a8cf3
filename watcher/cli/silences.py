"""``watcher silence add|list|expire``: mute a rule's notifications for a while
(docs/rules.md, "Silences"); muted alerts stay in the history."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from watcher.cli.support import (
    ConfigOption,
    command_store,
    fail_with_problems,
    load_for_state,
    settings_or_exit,
    state_or_exit,
    usage_error,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from watcher.kinds.ruleset import RuleSet

silence_app = typer.Typer(
    help="Mute a rule's notifications for a while; muted alerts stay in the history.",
    no_args_is_help=True,
)


def _builtin_subjects() -> dict[str, tuple[str, ...]]:
    """The daemon's built-in alerts can be silenced too; each has one subject, but
    rpc_disagreement (one per voted target, ``_silenceable``)."""
    from watcher.alerting import builtin
    from watcher.config import rule_models

    return {
        rule_models.RPC_UNHEALTHY: (builtin.RPC_SUBJECT,),
        rule_models.RPC_DISAGREEMENT: (),
        rule_models.CLUSTER_DELINQUENT_STAKE: (rule_models.CLUSTER_SUBJECT,),
    }


def _silenceable(ruleset: RuleSet) -> dict[str, Sequence[str]]:
    """Rule name -> the subjects its alerts can have (its addresses, mints or validators)."""
    from watcher.alerting import builtin
    from watcher.config.rule_models import RPC_DISAGREEMENT, StateRule
    from watcher.kinds import source_of

    # rpc_disagreement: one subject per target a state rule watches (put to a vote).
    voted = tuple(
        dict.fromkeys(
            builtin.disagreement_subject(source_of(rule.kind).name, target)
            for rule in ruleset.rules
            if isinstance(rule, StateRule)
            for target in rule.targets
        )
    )
    return {
        **_builtin_subjects(),
        RPC_DISAGREEMENT: voted,
        **{rule.name: rule.watched for rule in ruleset.rules},
    }


def operator() -> str | None:
    """Who adds a silence: ``$USER``, ``$LOGNAME``, else the name of the process's uid (a
    service account or a container often sets neither variable)."""
    import os
    import pwd

    named = os.environ.get("USER") or os.environ.get("LOGNAME")
    if named:
        return named
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid with no passwd entry (a container's arbitrary uid)
        return None


@silence_app.command("add")
def silence_add(
    config: ConfigOption,
    rule: Annotated[str, typer.Option(help="The rule to silence (its name).")],
    duration: Annotated[str, typer.Option("--for", help="How long: 30m, 2h, 1d, 1h30m ...")],
    comment: Annotated[str, typer.Option(help="Why (required); listed with the silence.")],
    subject: Annotated[
        str | None,
        typer.Option(help="Only this address, mint or validator of the rule (default: all)."),
    ] = None,
) -> None:
    """Silence a rule (or one subject of it) from now on, for --for."""
    import time

    from watcher.core.clock import iso
    from watcher.core.durations import parse_duration
    from watcher.core.errors import ConfigError
    from watcher.core.events import NewSilence

    if not comment.strip():
        usage_error("--comment must say why the rule is silenced")
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        usage_error(f"--for: {exc}")
    if seconds <= 0:
        usage_error("--for must be longer than 0s")
    try:
        settings, ruleset = load_for_state(config)
    except ConfigError as exc:
        fail_with_problems(list(exc.problems))
    watched = _silenceable(ruleset).get(rule)
    if watched is None:
        known = ", ".join(sorted(r.name for r in ruleset.rules)) or "none"
        usage_error(
            f"no rule named {rule!r} in the rule files (rules: {known}; built-in: "
            f"{', '.join(sorted(_builtin_subjects()))})"
        )
    if subject is not None and subject not in watched:
        usage_error(f"rule {rule!r} does not watch {subject} (it watches: {', '.join(watched)})")
    now = time.time()
    # Never upgrades an existing database: that is for `watcher run`, which may be running.
    with state_or_exit(), command_store(settings, readonly=False) as store:
        new = NewSilence(rule, subject, now, now + seconds, comment.strip(), operator())
        silence = store.add_silence(new, now)
    typer.echo(
        f"silence {silence.id}: {rule} ({subject or 'every subject'}) "
        f"silenced until {iso(silence.ends_at)}"
    )


@silence_app.command("list")
def silence_list(
    config: ConfigOption,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also silences that ended or were expired.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Silences in effect (or all of them with --all), newest first."""
    import time

    from watcher.core.clock import iso

    settings = settings_or_exit(config, readonly=True)
    now = time.time()
    with state_or_exit(), command_store(settings, readonly=True) as store:
        silences = store.list_silences(now, include_expired=show_all)
    for silence in silences:
        state = "active" if silence.is_active(now) else "expired"
        if as_json:
            typer.echo(json.dumps({**silence.as_dict(), "state": state}, sort_keys=True))
        else:
            typer.echo(
                f"{silence.id:>4}  {state:7}  {silence.rule}  {silence.subject or '*'}  "
                f"{iso(silence.starts_at)} -> {iso(silence.ended_at())}  "
                f"by {silence.created_by or '?'}: {silence.comment}"
            )
    if not silences and not as_json:
        typer.echo("no silences" if show_all else "no active silences")


@silence_app.command("expire")
def silence_expire(
    silence_id: Annotated[int, typer.Argument(metavar="ID", help="The silence's id.")],
    config: ConfigOption,
) -> None:
    """End a silence now: the rule notifies again from its next poll."""
    import time

    from watcher.core.clock import iso

    settings = settings_or_exit(config, readonly=True)
    if settings.state_url is None and not settings.state_path.exists():
        typer.echo(f"watcher: no silence {silence_id} (no state database yet)", err=True)
        raise typer.Exit(code=1)
    now = time.time()
    with state_or_exit(), command_store(settings, readonly=False) as store:
        if store.expire_silence(silence_id, now):
            typer.echo(f"silence {silence_id} expired")
            return
        known = {s.id: s for s in store.list_silences(now, include_expired=True)}
    if silence_id not in known:
        typer.echo(f"watcher: no silence {silence_id} (see: watcher silence list --all)", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"silence {silence_id} had already ended at {iso(known[silence_id].ended_at())}")
