"""Shared by every stage: the values passed between them (alerts, target states, outbox rows),
the clock, durations, the error tree, redaction of secrets, logging, retry pauses."""
