-- When the watch of a target began, while its first poll has not come (NULL: polled, or never
-- asked for): written with the target's first row (``register_watch``), cleared by the first
-- state written without the "_since" key. Counted by ``watcher status`` and /metrics through
-- the partial index, which holds only the targets still waiting.
ALTER TABLE targets ADD COLUMN awaiting_since REAL;
CREATE INDEX targets_awaiting ON targets (source, awaiting_since)
    WHERE awaiting_since IS NOT NULL;
