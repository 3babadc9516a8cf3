"""What the example rules of rules/nft.yaml and rules/programs.yaml watch, in the demo ledger.

The demo (``watcher demo``) runs every example rule; a rule can only take its baseline when
what it watches exists (an unknown asset or master edition is never evidence). Nothing here
changes during the demo: these rules stay quiet in it (their rule tests show them notify).
"""

from __future__ import annotations

from watcher.simulator.das import das_of
from watcher.simulator.ledger import Ledger

VAULT_ASSET = "26cUEE3Q6Y1bM2tFEu8vhRnRjKNcjR4bnaVhtXac33F4"  # rules/nft.yaml vault-asset
VAULT_OWNER = "3r6oQcm8k94yMckhVuvJNhY3YNVb4wWsbx1VuTK9n4wf"
COLLECTION = "8tjMB62AWqPCFViKRW1vfuGUa2EH28FgH8qWwzXNUGuU"
MASTER_EDITION = "8DYcKePjVCACHduzo937dwbNDbcJUjGeqzeL4JEz7d7p"  # rules/nft.yaml prints


def das_demo_setup(ledger: Ledger) -> None:
    das = das_of(ledger)
    das.assets.set_asset(VAULT_ASSET, owner=VAULT_OWNER, collection=COLLECTION, name="Lad #1")
    das.editions.set_master(MASTER_EDITION, 100)
