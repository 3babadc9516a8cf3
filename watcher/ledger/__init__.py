"""The ledger service: the only JSON-RPC client, its endpoints and their failover, the quorum,
the answer models and the plausibility of answers."""
