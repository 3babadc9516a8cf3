-- Event alerts carry their rule's grouping (NULL: sent alone); group_sends remembers when each
-- group last sent to each URL, for group_interval and max_per_hour.
ALTER TABLE alerts ADD COLUMN group_key TEXT;
ALTER TABLE alerts ADD COLUMN grouping TEXT;
CREATE TABLE group_sends (
    group_key TEXT NOT NULL,
    url_id TEXT NOT NULL,
    sent_at REAL NOT NULL,
    alerts INTEGER NOT NULL
) STRICT;
CREATE INDEX group_sends_latest ON group_sends (group_key, url_id, sent_at);
