-- The SQLite engine's schema, version 1: target states, alerts and the delivery outbox.
--
-- Files here are append-only: never edit one that has shipped, add the next (NNNN_name.sql,
-- numbered without a gap). Each runs in its own transaction with the insert of its version
-- into schema_migrations (watcher/state/database.py), one statement after another: end each
-- statement at the end of a line. The PostgreSQL engine's files (sql/postgresql/) make the same
-- tables in its types, numbered for itself.

CREATE TABLE targets (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (source, target)
) STRICT;

CREATE TABLE alerts (
    id INTEGER PRIMARY KEY,
    created_at REAL NOT NULL,
    rule TEXT NOT NULL,
    severity TEXT NOT NULL,
    subject TEXT NOT NULL,
    reason TEXT NOT NULL,
    dedup_key TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    facts TEXT NOT NULL,
    status TEXT NOT NULL
) STRICT;
CREATE INDEX alerts_rule_created ON alerts (rule, created_at);
CREATE INDEX alerts_created ON alerts (created_at);

CREATE TABLE deliveries (
    id INTEGER PRIMARY KEY,
    alert_id INTEGER NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    url_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error TEXT,
    sent_at REAL,
    created_at REAL NOT NULL,
    UNIQUE (alert_id, url_id)
) STRICT;
CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at);
