-- Deliveries claimed, not requeued: several instances share the outbox.
--
-- A sender claims due deliveries in one short transaction (SELECT ... FOR UPDATE SKIP LOCKED,
-- then status 'sending' with its claim_token and claim_expires_at, the database's clock:
-- extract(epoch from clock_timestamp()) plus the claim's time to live), sends outside any
-- transaction, and marks each delivery sent, retried or dead only while claim_token is still
-- its own. A claim past claim_expires_at (its sender died or stalled) is taken again by any
-- instance with a new token, so nothing is requeued at start-up and a late ack changes
-- nothing (watcher/state/pg_deliveries.py). Both columns are NULL when no claim is held.
--
-- The SQLite engine has the same columns and index (its migration 6) and leaves them NULL.
--
-- Waking senders: no trigger. The transaction that inserts deliveries calls
-- pg_notify('watcher_outbox', '') itself (pg_deliveries.notify_outbox): PostgreSQL delivers a
-- notification at COMMIT only, never for a rollback, and folds identical ones of a transaction
-- into one; listeners keep polling too, so a lost notification delays, never loses, a send.

ALTER TABLE deliveries ADD COLUMN claim_token text;
ALTER TABLE deliveries ADD COLUMN claim_expires_at double precision;

-- The claim's second half: 'sending' rows whose claim has expired (the first half, due
-- 'pending' rows, reads deliveries_due); also the few live claims a claim checks per URL.
CREATE INDEX deliveries_claims ON deliveries (status, claim_expires_at);
