"""The ledger service: the only JSON-RPC client, the answer models, the plausibility of
answers, and the simulator that speaks like a real node."""
