"""The asset interfaces of the DAS API (the ``interface`` of each asset it lists): one list for
the ledger's answers (``watcher.ledger.models_das``) and the ledger simulator's assets."""

from __future__ import annotations

from typing import Literal

# Every interface but Metaplex Core's two: those of the assets the ledger simulator knows.
NonCoreInterface = Literal[
    "V1_NFT",
    "V1_PRINT",
    "LEGACY_NFT",
    "V2_NFT",
    "FungibleAsset",
    "FungibleToken",
    "Custom",
    "Identity",
    "Executable",
    "ProgrammableNFT",
]
# Every interface the DAS API answers with.
Interface = Literal[NonCoreInterface, "MplCoreAsset", "MplCoreCollection"]
