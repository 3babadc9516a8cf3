"""Shared by every stage: the clock, durations, the error tree, redaction of secrets, logging."""
