"""Which parts of an RPC URL are secret, and masking them everywhere."""

from __future__ import annotations

import pytest

from watcher.redact import Redactor, split_rpc_url


@pytest.mark.parametrize(
    ("url", "public", "secrets"),
    [
        # The service's own form: the key after /v3/.
        ("https://rpc.example.com/v3/k3yK3yK3y", "https://rpc.example.com/v3/***", ("k3yK3yK3y",)),
        ("https://rpc.example.com/v3/k3y/", "https://rpc.example.com/v3/***/", ("k3y",)),
        ("https://h.example/api/v3/a/b", "https://h.example/api/v3/***", ("a/b",)),
        (
            "https://solana-mainnet.g.alchemy.com/v2/AbC",
            "https://solana-mainnet.g.alchemy.com/v2/***",
            ("AbC",),
        ),
        # Two or more segments: the last one.
        ("https://rpc.ankr.com/solana/abc123", "https://rpc.ankr.com/solana/***", ("abc123",)),
        # One segment: only when it is long enough to be a key.
        (
            "https://n.quiknode.pro/0123456789abcdef0123/",
            "https://n.quiknode.pro/***/",
            ("0123456789abcdef0123",),
        ),
        ("https://rpc.ankr.com/solana", "https://rpc.ankr.com/solana", ()),
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
        assert secret not in split.public_url.replace("***", "")


def test_redactor_masks_every_occurrence_and_the_longest_secret_whole() -> None:
    redactor = Redactor()
    assert redactor.redact("nothing registered") == "nothing registered"
    redactor.add("abc", "abcdef", "")
    assert "" not in redactor
    assert redactor.redact("x abcdef y abc z abcabc") == "x *** y *** z ******"


def test_redactor_masks_the_url_quoted_and_unquoted_forms() -> None:
    redactor = Redactor()
    redactor.add("k/y+1")
    assert redactor.redact("raw k/y+1 quoted k%2Fy%2B1") == "raw *** quoted ***"
    redactor.add("p%40ss")
    assert redactor.redact("p@ss and p%40ss") == "*** and ***"


def test_redactor_treats_secrets_as_text_not_patterns() -> None:
    redactor = Redactor()
    redactor.add("a.c")
    assert redactor.redact("abc a.c") == "abc ***"
