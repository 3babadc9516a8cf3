"""``watcher simulate``: serve the ledger simulator, and change the running one from another
terminal with the rule tests' vocabulary (``watcher.ruletest.control``). Every command finds the
simulator on ``--port``, by default ``$WATCHER_SIMULATE_PORT`` (else 8899)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

simulate_app = typer.Typer(
    help="Serve the ledger simulator on loopback; change its ledger while it runs.",
    add_completion=False,
    pretty_exceptions_enable=False,
)

PORT_VARIABLE = "WATCHER_SIMULATE_PORT"
DEFAULT_PORT = 8899
PortOption = Annotated[
    int,
    typer.Option(envvar=PORT_VARIABLE, help="Port of the running simulator (127.0.0.1)."),
]
# What a command line writes for "nobody holds it" (JSON null).
NULL_WORDS = frozenset({"null", "none"})


@simulate_app.callback(invoke_without_command=True)
def simulate(
    ctx: typer.Context,
    port: Annotated[
        int, typer.Option(envvar=PORT_VARIABLE, help="Port on 127.0.0.1 to serve on.")
    ] = DEFAULT_PORT,
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
        str, typer.Option(help="Scripted scenario to play: demo, treasury, quiet or quiet-history.")
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
        port, scenario, api_key, speed=speed, ledger=seeded, control=apply_control, limits=limits
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
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Add transactions touching ADDRESS (add_transactions)."""
    action: dict[str, Any] = {"address": address, "count": count, "failed": failed}
    if memo is not None:
        action["memo"] = memo
    _send(port, {"add_transactions": action})


@simulate_app.command("delinquent")
def delinquent(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Make a validator delinquent (mark_delinquent)."""
    _send(port, {"mark_delinquent": validator})


@simulate_app.command("current")
def current(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Make a validator vote again (mark_current)."""
    _send(port, {"mark_current": validator})


@simulate_app.command("vote-balance")
def vote_balance(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    lamports: Annotated[int, typer.Argument(min=0, help="Its vote account's new balance.")],
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Drain or top up a validator's vote account (update_validator balance)."""
    _send(port, {"update_validator": {"validator": validator, "balance": lamports}})


@simulate_app.command("stake")
def stake(
    validator: Annotated[str, typer.Argument(help="Vote or identity pubkey.")],
    lamports: Annotated[int, typer.Argument(min=0, help="Its new activated stake (0: none).")],
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Set a validator's activated stake: past the cut, or none at all (update_validator)."""
    _send(port, {"update_validator": {"validator": validator, "stake": lamports}})


@simulate_app.command("version")
def version(
    node: Annotated[str, typer.Argument(help="The node's identity pubkey.")],
    new_version: Annotated[str, typer.Argument(metavar="VERSION", help="e.g. 2.3.5")],
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Set the version a gossip node reports (set_node)."""
    _send(port, {"set_node": {"identity": node, "version": new_version}})


@simulate_app.command("holder")
def holder(
    mint: Annotated[str, typer.Argument(help="The token's mint.")],
    account: Annotated[str, typer.Argument(help="The token account.")],
    amount: Annotated[int, typer.Argument(min=0, help="Raw amount (times 10^decimals).")],
    port: PortOption = DEFAULT_PORT,
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
    port: PortOption = DEFAULT_PORT,
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
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Mint or burn: the difference goes to (or comes from) the largest account (set_supply)."""
    _send(port, {"set_supply": {"mint": mint, "amount": amount}})


@simulate_app.command("balance")
def balance(
    account: Annotated[str, typer.Argument(help="The account (created when unknown).")],
    lamports: Annotated[
        int,
        typer.Argument(
            min=0, metavar="AMOUNT", help="Its new balance in lamports (with --mint: raw units)."
        ),
    ],
    mint: Annotated[
        str | None,
        typer.Option(help="Set ACCOUNT's balance of this token instead (its token account)."),
    ] = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Set an account's lamports (set_account), or with --mint an owner's token balance, in
    raw units (set_token_account: its own token account of the mint, created when it has
    none), so that it can `transfer --mint`. No transaction is listed: the next notification
    of a watched address counts the change."""
    if mint is None:
        _send(port, {"set_account": {"address": account, "lamports": lamports}})
        return
    from watcher.simulator.transfers import token_account_address

    held = {
        "address": token_account_address(account, mint),
        "mint": mint,
        "owner": account,
        "amount": lamports,
    }
    _send(port, {"set_token_account": held})


@simulate_app.command("asset")
def asset(
    asset_id: Annotated[str, typer.Argument(metavar="ID", help="The asset id.")],
    owner: Annotated[str | None, typer.Option(help="New owner (required for a new asset).")] = None,
    delegate: Annotated[str | None, typer.Option(help="New delegate, or null: none.")] = None,
    frozen: Annotated[bool | None, typer.Option(help="Frozen or thawed.")] = None,
    burnt: Annotated[bool | None, typer.Option(help="Burnt.")] = None,
    json_uri: Annotated[str | None, typer.Option(help="New metadata URI.")] = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Add an asset or change the keys given (set_asset)."""
    given = {
        "owner": owner,
        "delegate": delegate,
        "frozen": frozen,
        "burnt": burnt,
        "json_uri": json_uri,
    }
    changes: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if delegate is not None:
        changes["delegate"] = _key_or_null(delegate)
    _send(port, {"set_asset": {"id": asset_id, **changes}})


@simulate_app.command("nonce")
def nonce(
    account: Annotated[str, typer.Argument(help="The durable nonce account.")],
    authority: Annotated[
        str | None, typer.Option(help="Its authority (required to create it; else moves it).")
    ] = None,
    advance: Annotated[bool, typer.Option(help="Advance its stored nonce (it was used).")] = False,
    close: Annotated[bool, typer.Option(help="Close it (its lamports withdrawn).")] = False,
    port: PortOption = DEFAULT_PORT,
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


# -- transfers -----------------------------------------------------------------------------


@simulate_app.command("transfer")
def transfer(
    source: Annotated[str, typer.Argument(metavar="FROM", help="The paying address.")],
    destination: Annotated[str, typer.Argument(metavar="TO", help="The receiving address.")],
    amount: Annotated[
        str,
        typer.Argument(
            metavar="AMOUNT", help="In SOL, or in the mint's units (e.g. 25000 USDC): exact."
        ),
    ],
    mint: Annotated[str | None, typer.Option(help="Move this token instead of SOL.")] = None,
    fee: Annotated[int, typer.Option(min=0, help="Lamports FROM pays for it.")] = 5000,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Move SOL (or a token: --mint) from FROM to TO in one transaction (transfer).

    The transaction is listed in both addresses' histories; FROM pays the fee; its signature
    is printed."""
    move: dict[str, Any] = {
        "source": source,
        "destination": destination,
        "amount": _decimal_text(amount),
        "fee": fee,
    }
    if mint is not None:
        move["mint"] = mint
    _send(port, {"transfer": move})


@simulate_app.command("dust")
def dust(
    address: Annotated[str, typer.Argument(help="The address dusted.")],
    count: Annotated[int, typer.Option(min=1, max=10_000, help="How many transfers.")] = 1,
    lamports: Annotated[int, typer.Option(min=1, help="Lamports each.")] = 1,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Send tiny transfers to ADDRESS from look-alike addresses (dust).

    Each comes from a new address with the same first and last four characters (address
    poisoning), funded first."""
    _send(port, {"dust": {"address": address, "count": count, "lamports": lamports}})


def _decimal_text(text: str) -> str:
    """The amount as written, refused here when it is not a plain decimal number."""
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.replace(",", "").replace("_", ""))
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        typer.echo(f"watcher simulate: not a positive amount: {text!r}", err=True)
        raise typer.Exit(code=2)
    return format(value, "f")


# -- the endpoint's faults -----------------------------------------------------------------

FAULT_HELP = (
    "http_503 (or http_502: an HTML error page), http_429, timeout (no answer for 30 s), "
    "garbage, truncated_json, rpc_error (node behind), rpc_429, wrong_shape; clear: stop them"
)
ForOption = Annotated[
    str | None,
    typer.Option("--for", help="For this long (e.g. 30s, 2m), every request; else --count."),
]
CountOption = Annotated[
    int | None, typer.Option(min=1, help="For the next N requests (default 1, without --for).")
]
MethodOption = Annotated[
    str | None, typer.Option(help="Only requests calling this method (e.g. getMultipleAccounts).")
]


@simulate_app.command("fault")
def fault(
    kind: Annotated[str, typer.Argument(metavar="KIND", help=FAULT_HELP)],
    for_: ForOption = None,
    count: CountOption = None,
    method: MethodOption = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Make the endpoint fail for a while (--for 30s) or the next requests (--count N).

    `watcher simulate fault clear` makes it answer again."""
    if kind == "clear":
        _send(port, {"clear_faults": True})
        return
    _send(port, {"fault": _fault(kind, for_, count, method)})


@simulate_app.command("slow")
def slow(
    delay: Annotated[str, typer.Option(help="Each answer waits this long (e.g. 2s, 500ms).")],
    for_: ForOption = None,
    count: CountOption = None,
    method: MethodOption = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Make the endpoint answer slowly: for a while (--for 30s) or the next requests."""
    _send(port, {"fault": {**_fault("timeout", for_, count, method), "delay": delay}})


def _fault(kind: str, for_: str | None, count: int | None, method: str | None) -> dict[str, Any]:
    given = {"kind": kind, "for": for_, "count": count, "method": method}
    return {key: value for key, value in given.items() if value is not None}


# -- powers: mints, programs, multisigs ----------------------------------------------------

KeyOrNull = Annotated[str | None, typer.Option(help="A pubkey, or null: nobody holds it.")]


def _key_or_null(value: str) -> str | None:
    return None if value.lower() in NULL_WORDS else value


def _powers(**given: str | None) -> dict[str, str | None]:
    """The powers given on the command line (null included), by their action's keys."""
    return {key: _key_or_null(value) for key, value in given.items() if value is not None}


@simulate_app.command("mint")
def mint(
    address: Annotated[str, typer.Argument(metavar="MINT", help="The mint (created if new).")],
    mint_authority: KeyOrNull = None,
    freeze_authority: KeyOrNull = None,
    permanent_delegate: Annotated[
        str | None, typer.Option(help="A pubkey or null (Token-2022 only).")
    ] = None,
    transfer_hook_program: Annotated[
        str | None, typer.Option(help="A program or null (Token-2022 only).")
    ] = None,
    token_2022: Annotated[
        bool | None,
        typer.Option("--token-2022/--spl-token", help="Its token program (a new mint's)."),
    ] = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Create a mint or change its powers; a power left out is kept (set_mint)."""
    change: dict[str, Any] = {
        "mint": address,
        **_powers(
            mint_authority=mint_authority,
            freeze_authority=freeze_authority,
            permanent_delegate=permanent_delegate,
            transfer_hook_program=transfer_hook_program,
        ),
    }
    if token_2022 is not None:
        change["token_2022"] = token_2022
    _send(port, {"set_mint": change})


@simulate_app.command("program")
def program(
    address: Annotated[str, typer.Argument(metavar="PROGRAM", help="The upgradeable program.")],
    upgrade_authority: Annotated[
        str | None,
        typer.Option(help="A pubkey (deploys a new program), or null: immutable."),
    ] = None,
    redeploy: Annotated[bool, typer.Option(help="Redeploy it at the current slot.")] = False,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Deploy a program, change its upgrade authority or redeploy it (set_upgradeable_program)."""
    change: dict[str, Any] = {
        "program": address,
        "redeploy": redeploy,
        **_powers(upgrade_authority=upgrade_authority),
    }
    _send(port, {"set_upgradeable_program": change})


@simulate_app.command("multisig")
def multisig(
    address: Annotated[str, typer.Argument(metavar="MULTISIG", help="The Squads v4 multisig.")],
    member: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY:PERMISSIONS (1 initiate, 2 vote, 4 execute, added up; default 7), "
            "repeated: the members, all of them (creates a new multisig)."
        ),
    ] = None,
    threshold: Annotated[int | None, typer.Option(min=1, help="Approvals needed.")] = None,
    time_lock: Annotated[
        int | None, typer.Option(min=0, help="Seconds between approval and execution.")
    ] = None,
    config_authority: KeyOrNull = None,
    transaction_index: Annotated[
        int | None, typer.Option(min=0, help="Its transaction counter (not a power).")
    ] = None,
    port: PortOption = DEFAULT_PORT,
) -> None:
    """Create a Squads v4 multisig or change what is given (set_multisig)."""
    change: dict[str, Any] = {"multisig": address, **_powers(config_authority=config_authority)}
    if member:
        change["members"] = dict(_member(text) for text in member)
    for key, value in (
        ("threshold", threshold),
        ("time_lock", time_lock),
        ("transaction_index", transaction_index),
    ):
        if value is not None:
            change[key] = value
    _send(port, {"set_multisig": change})


def _member(text: str) -> tuple[str, int]:
    key, _, mask = text.partition(":")
    if not mask:
        return key, 7
    if not mask.isdigit():
        typer.echo(f"watcher simulate: --member KEY:PERMISSIONS, not {text!r}", err=True)
        raise typer.Exit(code=2)
    return key, int(mask)
