"""`watcher test`: rule tests (a seeded ledger, steps, expected notifications), run offline."""
