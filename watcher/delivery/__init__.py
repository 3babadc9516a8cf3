"""From the outbox to the channels: retry schedule, digests, the sender loop and the Apprise
adapter."""
