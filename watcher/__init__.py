"""watcher: monitoring and alerting for a Solana-style ledger."""

__version__ = "0.1.0"
