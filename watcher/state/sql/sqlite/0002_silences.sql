CREATE TABLE silences (
    id INTEGER PRIMARY KEY,
    rule TEXT NOT NULL,
    subject TEXT,
    starts_at REAL NOT NULL,
    ends_at REAL NOT NULL,
    comment TEXT NOT NULL,
    created_by TEXT,
    created_at REAL NOT NULL,
    expired_at REAL
) STRICT;
CREATE INDEX silences_ends ON silences (ends_at);
