"""``watcher simulate``: serve the ledger simulator, and change the running one from another
terminal with the rule tests' vocabulary (``watcher.ruletest.control``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

simulate_app = typer.Typer(
    help="Serve the ledger simulator on loopback; change its ledger while it runs.",
    add_completion=False,
    pretty_exceptions_enable=False,
)

PortOption = Annotated[int, typer.Option(help="Port of the running simulator (127.0.0.1).")]


@simulate_app.callback(invoke_without_command=True)
def simulate(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 to serve on.")] = 8899,
    ledger: Annotated[
        Path | None,
        typer.Option(
            help="Seed the ledger from the `ledger:` section of a rule test file "
            "(no scenario is played).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    scenario: Annotated[
        str, typer.Option(help="Scripted scenario to play: demo or quiet.")
    ] = "demo",
    api_key: Annotated[str, typer.Option(help="The key expected in the path /v3/KEY.")] = "sim-key",
    speed: Annotated[
        float,
        typer.Option(help="Scenario speed: 0.1 plays it ten times slower (for slower polls)."),
    ] = 1.0,
    latency: Annotated[
        float, typer.Option(min=0, help="Seconds added to every HTTP answer.")
    ] = 0.0,
    enforce_rps: Annotated[
        float | None,
        typer.Option(min=0.001, help="Requests/s accepted (1 s sliding window); 429 beyond."),
    ] = None,
    batches: Annotated[
        bool, typer.Option(help="Accept JSON-RPC batches (--no-batches refuses them).")
    ] = True,
) -> None:
    """Serve the ledger simulator on loopback, for trying rules against a scripted ledger or
    your own (`--ledger`); `watcher simulate tx ADDRESS` (and the other commands below) change
    it while it runs."""
    if ctx.invoked_subcommand is not None:
        return
    from watcher.core.errors import ConfigError
    from watcher.ruletest.control import apply_control, ledger_from_file
    from watcher.simulator import ProviderLimits, serve

    seeded = None
    if ledger is not None:
        try:
            seeded = ledger_from_file(ledger)
        except ConfigError as exc:
            for problem in exc.problems:
                typer.echo(str(problem), err=True)
            raise typer.Exit(code=2) from None
    limits = ProviderLimits(latency=latency, enforce_rps=enforce_rps, batches=batches)
    code = serve(
        port, scenario, api_key, speed=speed, ledger=seeded, control=apply_control, **limits
    )
    raise typer.Exit(code=code)


def _send(port: int, action: dict[str, Any]) -> None:
    from watcher.ruletest.control import send_action

    try:
        typer.echo(send_action(port, action))
    except ValueError as exc:
        typer.echo(f"watcher simulate: {exc}", err=True)
        raise typer.Exit(code=1) from None


@simulate_app.command("tx")
def tx(
    address: Annotated[str, typer.Argument(help="The address the transactions touch.")],
    count: Annotated[int, typer.Option(min=1, help="How many transactions.")] = 1,
    memo: Annotated[str | None, typer.Option(help="A memo on each.")] = None,
    failed: Annotated[bool, typer.Option(help="Failed transactions.")] = False,
    port: PortOption = 8899,
) -> None:
    """Add transactions touching ADDRESS (add_transactions)."""
    action: dict[str, Any] = {"address": address, "count": count, "failed": failed}
    if memo is not None:
        action["memo"] = memo
    _send(port, {"add_transactions": action})


@simulate_app.command("delinquent")
def delinquent(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    port: PortOption = 8899,
) -> None:
    """Make a validator delinquent (mark_delinquent)."""
    _send(port, {"mark_delinquent": validator})


@simulate_app.command("current")
def current(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    port: PortOption = 8899,
) -> None:
    """Make a validator vote again (mark_current)."""
    _send(port, {"mark_current": validator})


@simulate_app.command("vote-balance")
def vote_balance(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    lamports: Annotated[int, typer.Argument(min=0, help="Its vote account's new balance.")],
    port: PortOption = 8899,
) -> None:
    """Drain or top up a validator's vote account (update_validator balance)."""
    _send(port, {"update_validator": {"validator": validator, "balance": lamports}})


@simulate_app.command("stake")
def stake(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    lamports: Annotated[int, typer.Argument(min=0, help="Its new activated stake (0: none).")],
    port: PortOption = 8899,
) -> None:
    """Set a validator's activated stake: past the cut, or none at all (update_validator)."""
    _send(port, {"update_validator": {"validator": validator, "stake": lamports}})


@simulate_app.command("version")
def version(
    node: Annotated[str, typer.Argument(help="The node's identity pubkey.")],
    new_version: Annotated[str, typer.Argument(metavar="VERSION", help="e.g. 2.3.5")],
    port: PortOption = 8899,
) -> None:
    """Set the version a gossip node reports (set_node)."""
    _send(port, {"set_node": {"identity": node, "version": new_version}})


@simulate_app.command("holder")
def holder(
    mint: Annotated[str, typer.Argument(help="The token's mint.")],
    account: Annotated[str, typer.Argument(help="The token account.")],
    amount: Annotated[int, typer.Argument(min=0, help="Raw amount (times 10^decimals).")],
    port: PortOption = 8899,
) -> None:
    """Set a token account's balance (set_holder_amount)."""
    _send(port, {"set_holder_amount": {"mint": mint, "account": account, "amount": amount}})


@simulate_app.command("action")
def action(
    text: Annotated[
        str,
        typer.Argument(
            metavar="ACTION",
            help="One rule-test action in YAML, e.g. '{remove_holder: {mint: M, account: A}}'.",
        ),
    ],
    port: PortOption = 8899,
) -> None:
    """Apply any rule-test action (docs/rules.md, "Rule tests") to the running simulator."""
    import yaml

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        typer.echo(f"watcher simulate: not YAML: {exc}", err=True)
        raise typer.Exit(code=2) from None
    if not isinstance(parsed, dict):
        typer.echo(
            "watcher simulate: write one action as a mapping, e.g. '{mark_current: V}'", err=True
        )
        raise typer.Exit(code=2)
    _send(port, parsed)


@simulate_app.command("supply")
def supply(
    mint: Annotated[str, typer.Argument(help="The token's mint.")],
    amount: Annotated[int, typer.Argument(min=0, help="The new raw supply.")],
    port: PortOption = 8899,
) -> None:
    """Mint or burn: the difference goes to (or comes from) the largest account (set_supply)."""
    _send(port, {"set_supply": {"mint": mint, "amount": amount}})


@simulate_app.command("balance")
def balance(
    account: Annotated[str, typer.Argument(help="The account (created when unknown).")],
    lamports: Annotated[int, typer.Argument(min=0, help="Its new balance in lamports.")],
    port: PortOption = 8899,
) -> None:
    """Set an account's lamports (set_account)."""
    _send(port, {"set_account": {"address": account, "lamports": lamports}})


@simulate_app.command("asset")
def asset(
    asset_id: Annotated[str, typer.Argument(metavar="ID", help="The asset id.")],
    owner: Annotated[str | None, typer.Option(help="New owner (required for a new asset).")] = None,
    delegate: Annotated[str | None, typer.Option(help="New delegate.")] = None,
    frozen: Annotated[bool | None, typer.Option(help="Frozen or thawed.")] = None,
    burnt: Annotated[bool | None, typer.Option(help="Burnt.")] = None,
    json_uri: Annotated[str | None, typer.Option(help="New metadata URI.")] = None,
    port: PortOption = 8899,
) -> None:
    """Add an asset or change the keys given (set_asset)."""
    given = {
        "owner": owner,
        "delegate": delegate,
        "frozen": frozen,
        "burnt": burnt,
        "json_uri": json_uri,
    }
    changes = {key: value for key, value in given.items() if value is not None}
    _send(port, {"set_asset": {"id": asset_id, **changes}})


@simulate_app.command("nonce")
def nonce(
    account: Annotated[str, typer.Argument(help="The durable nonce account.")],
    authority: Annotated[
        str | None, typer.Option(help="Its authority (required to create it; else moves it).")
    ] = None,
    advance: Annotated[bool, typer.Option(help="Advance its stored nonce (it was used).")] = False,
    close: Annotated[bool, typer.Option(help="Close it (its lamports withdrawn).")] = False,
    port: PortOption = 8899,
) -> None:
    """Create a durable nonce account, hand it to another authority, advance or close it
    (set_nonce_account, close_nonce_account)."""
    if close:
        _send(port, {"close_nonce_account": account})
        return
    change: dict[str, Any] = {"account": account, "advance": advance}
    if authority is not None:
        change["authority"] = authority
    _send(port, {"set_nonce_account": change})
