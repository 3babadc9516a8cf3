"""Which parts of an RPC URL are secret, and masking them everywhere."""

from __future__ import annotations

import pytest

from watcher.core.redact import Redactor, split_rpc_url


@pytest.mark.parametrize(
    ("url", "public", "secrets"),
    [
        # The service's own form: the key after /v3/.
        ("https://rpc.example.com/v3/k3yK3yK3y", "https://rpc.example.com/v3/***", ("k3yK3yK3y",)),
        ("https://rpc.example.com/v3/k3y/", "https://rpc.example.com/v3/***/", ("k3y",)),
        ("https://h.example/api/v3/a/b", "https://h.example/api/v3/***/***", ("a", "b")),
        (
            "https://solana-mainnet.g.alchemy.com/v2/AbC",
            "https://solana-mainnet.g.alchemy.com/v2/***",
            ("AbC",),
        ),
        # No version segment: every segment but the well-known route names, wherever it is.
        ("https://rpc.ankr.com/solana/abc123", "https://rpc.ankr.com/solana/***", ("abc123",)),
        (
            "https://host.example/Sh0rtK3y12ab/solana",
            "https://host.example/***/solana",
            ("Sh0rtK3y12ab",),
        ),
        ("https://host.example/Sh0rtK3y12ab", "https://host.example/***", ("Sh0rtK3y12ab",)),
        ("https://host.example/abc", "https://host.example/***", ("abc",)),
        ("https://host.example/k/rpc/x/", "https://host.example/***/rpc/***/", ("k", "x")),
        (
            "https://n.quiknode.pro/0123456789abcdef0123/",
            "https://n.quiknode.pro/***/",
            ("0123456789abcdef0123",),
        ),
        ("https://rpc.ankr.com/solana", "https://rpc.ankr.com/solana", ()),
        ("https://rpc.example.com/api/v2", "https://rpc.example.com/api/v2", ()),
        # No path, no secret.
        ("https://api.mainnet-beta.solana.com", "https://api.mainnet-beta.solana.com", ()),
        ("http://127.0.0.1:8899/", "http://127.0.0.1:8899/", ()),
        # Query values, userinfo and fragments are secret.
        (
            "https://mainnet.helius-rpc.com/?api-key=hk-123&x=",
            "https://mainnet.helius-rpc.com/?api-key=***&x=",
            ("hk-123",),
        ),
        (
            "https://user:pa55@host.example:8443/",
            "https://***:***@host.example:8443/",
            ("user", "pa55"),
        ),
        ("https://host.example/#frag", "https://host.example/#***", ("frag",)),
        (
            "https://alice:s3cret@host.example/v3/KEY9?token=T0k",
            "https://***:***@host.example/v3/***?token=***",
            ("alice", "s3cret", "KEY9", "T0k"),
        ),
    ],
)
def test_split_rpc_url(url: str, public: str, secrets: tuple[str, ...]) -> None:
    split = split_rpc_url(url)
    assert split.public_url == public
    assert split.secrets == secrets
    for secret in secrets:
        assert secret not in split.public_url.replace("***", "").split("/")


def test_redactor_masks_every_occurrence_and_the_longest_secret_whole() -> None:
    redactor = Redactor()
    assert redactor.redact("nothing registered") == "nothing registered"
    redactor.add("abcdefgh", "abcdefghijk", "")
    assert "" not in redactor
    assert redactor.redact("x abcdefghijk y abcdefgh z abcdefghabcdefgh") == "x *** y *** z ******"


def test_redactor_masks_the_url_quoted_and_unquoted_forms() -> None:
    redactor = Redactor()
    redactor.add("k/y+1-long")
    assert redactor.redact("raw k/y+1-long quoted k%2Fy%2B1-long") == "raw *** quoted ***"
    redactor.add("p%40ss-long")
    assert redactor.redact("p@ss-long and p%40ss-long") == "*** and ***"


def test_redactor_treats_secrets_as_text_not_patterns() -> None:
    redactor = Redactor()
    redactor.add("a.c.e.g.i")
    assert redactor.redact("abcdefghi a.c.e.g.i") == "abcdefghi ***"


def test_a_short_secret_is_masked_where_a_url_puts_it_not_inside_words() -> None:
    redactor = Redactor()
    redactor.add("main", "abc")
    text = (
        "GET https://host.example/main/x?k=abc&u=abc user:abc@host /abc, domain maintenance "
        "abc abcd main-net"
    )
    assert redactor.redact(text) == (
        "GET https://host.example/***/x?k=***&u=*** user:***@host /***, domain maintenance "
        "abc abcd main-net"
    )


def test_a_12_character_key_alone_in_the_path_is_masked_everywhere() -> None:
    redactor = Redactor()
    split = split_rpc_url("https://rpc.example.com/Sh0rtK3y12ab")
    redactor.add(*split.secrets)
    assert split.public_url == "https://rpc.example.com/***"
    assert redactor.redact("key Sh0rtK3y12ab, quoted 'Sh0rtK3y12ab'") == "key ***, quoted '***'"
