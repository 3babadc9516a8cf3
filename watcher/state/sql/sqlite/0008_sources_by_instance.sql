-- Each instance's last round of each source (the PostgreSQL engine's 0004): instances sharing a
-- PostgreSQL database each sweep their own shards. The SQLite engine is one instance, "". A
-- table of a new key: made anew.
CREATE TABLE sources_by_instance (
    source TEXT NOT NULL,
    finished_at REAL NOT NULL,
    targets INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    duration REAL NOT NULL,
    last_success_at REAL,
    instance TEXT NOT NULL,
    PRIMARY KEY (source, instance)
) STRICT;
INSERT INTO sources_by_instance SELECT *, '' FROM sources;
DROP TABLE sources;
ALTER TABLE sources_by_instance RENAME TO sources;
