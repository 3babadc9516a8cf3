-- Each instance's last round of each source (watcher status): instances sharing the database
-- each sweep their own shards, so one row per source showed whichever instance wrote last.
-- The rows of an instance without a heartbeat (gone, or stopped) are deleted with the lease
-- loop's pruning of heartbeats (watcher/state/pg_leases.py). The rows before this file were
-- nobody's in particular: they are the instance '' until that pruning.
--
-- The SQLite engine has the same column and key (its migration 8), always ''.

ALTER TABLE sources ADD COLUMN instance text NOT NULL DEFAULT '';
ALTER TABLE sources ALTER COLUMN instance DROP DEFAULT;
ALTER TABLE sources DROP CONSTRAINT sources_pkey;
ALTER TABLE sources ADD PRIMARY KEY (source, instance);
