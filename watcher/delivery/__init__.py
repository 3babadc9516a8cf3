"""From the outbox to the channels: retry schedule, digests, the sender and its URL workers,
the Apprise adapter, and the channels watcher posts to itself (Alertmanager, webhooks)."""
