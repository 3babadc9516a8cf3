-- Each source's last round (watcher status).
CREATE TABLE sources (
    source TEXT PRIMARY KEY,
    finished_at REAL NOT NULL,
    targets INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    duration REAL NOT NULL,
    last_success_at REAL
) STRICT;
