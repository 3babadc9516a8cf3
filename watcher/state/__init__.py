"""The state: the ``Store`` protocol and its two engines, SQLite (a file) and PostgreSQL (shared
by several instances), their schemas and migrations, and the queries (target states,
deliveries, silences, history, leases). Pure code never imports from here."""
