"""Markdown for the channels that render it, plain text elsewhere, and messages cut to each
service's size (watcher.delivery.apprise_adapter)."""

from __future__ import annotations

import pytest

from watcher.delivery.apprise_adapter import (
    TRUNCATED,
    escape,
    fit_for_url,
    renders_markdown,
    to_markdown,
)

SIG = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
ADDRESS = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
TX_LINK = f"https://explorer.solana.com/tx/{SIG}"
ADDRESS_LINK = f"https://explorer.solana.com/address/{ADDRESS}?cluster=devnet"


@pytest.mark.parametrize(
    ("url", "markdown"),
    [
        ("slack://T1/B2/C3/#ops", True),
        ("tgram://123:abc/456", True),
        ("discord://1/abc", True),
        ("mailto://user:pw@example.com", True),
        ("MAILTOS://user:pw@example.com", True),
        ("json://hooks.example.com/x", False),
        ("pagerduty://key@api", False),
        ("console://", False),
    ],
)
def test_markdown_is_chosen_per_apprise_schema(url: str, markdown: bool) -> None:
    assert renders_markdown(url) is markdown


def test_a_link_line_becomes_a_link_on_the_key_above_it() -> None:
    body = "\n".join(
        [
            f"Address: {ADDRESS} (hot_wallet)",
            f"  {ADDRESS_LINK}",
            "",
            f"- {SIG}  slot 5, 2026-01-01T00:00:00Z",
            f"  {TX_LINK}",
            f"- {SIG[:8]}…{SIG[-8:]} on 9xQe…VFin, slot 7",
            f"  {TX_LINK}",
            "... and 3 more",
            "",
            "Runbook: https://wiki.example/run_book",
        ]
    )
    assert to_markdown(body).split("\n") == [
        f"Address: [{ADDRESS}]({ADDRESS_LINK}) (hot\\_wallet)",
        "",
        # A signature's text is shortened: its link carries it in full.
        f"- [5VERv8NM…diSZkQUW]({TX_LINK})  slot 5, 2026-01-01T00:00:00Z",
        f"- [5VERv8NM…diSZkQUW]({TX_LINK}) on 9xQe…VFin, slot 7",
        "",  # the line after a list is not folded into its last item
        "... and 3 more",
        "",
        "Runbook: <https://wiki.example/run_book>",
    ]


def test_plain_text_shows_as_written_in_markdown() -> None:
    assert escape("[RESOLVED] a_b *c* `d` #e <f>") == (
        "\\[RESOLVED\\] a\\_b \\*c\\* \\`d\\` \\#e \\<f\\>"
    )
    # A link line about nothing on the line above stays a link of its own.
    assert to_markdown(f"Endpoint down\n  {TX_LINK}") == f"Endpoint down\n<{TX_LINK}>"


def test_a_cut_message_ends_at_a_line_so_no_link_is_cut_in_two() -> None:
    body = "\n".join(f"- [{SIG[:8]}…{SIG[-8:]}]({TX_LINK})  slot {n}" for n in range(40))
    title, fitted = fit_for_url("discord://1/abc", "title", body)
    assert len(title) + 1 + len(fitted) <= 2000
    kept = fitted.removesuffix(TRUNCATED).split("\n")
    assert kept == body.split("\n")[: len(kept)] and len(kept) > 10


def test_a_digest_keeps_its_nested_list_and_its_count_after_it() -> None:
    body = "\n".join(
        [
            "- 1 new transaction on 9xQe…VFin (hot wallet)",
            f"  - {SIG[:8]}…{SIG[-8:]}, slot 7",
            f"    {TX_LINK}",
            "... and 3 more",
        ]
    )
    assert to_markdown(body).split("\n") == [
        "- 1 new transaction on 9xQe…VFin (hot wallet)",
        f"  - [5VERv8NM…diSZkQUW]({TX_LINK}), slot 7",
        "",
        "... and 3 more",
    ]
