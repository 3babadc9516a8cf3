-- Deliveries claimed under a token until an expiry, for several instances sharing a PostgreSQL
-- database (watcher/state/pg_claims.py). The SQLite engine, one process, leaves them NULL: the
-- columns exist so that both engines hold the same rows of the outbox.
ALTER TABLE deliveries ADD COLUMN claim_token TEXT;
ALTER TABLE deliveries ADD COLUMN claim_expires_at REAL;
CREATE INDEX deliveries_claims ON deliveries (status, claim_expires_at);
