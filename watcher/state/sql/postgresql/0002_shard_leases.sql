-- Version 2: leased shards (several instances on one database), the same tables as the SQLite engine's migration 6
-- (watcher/state/database.py). watcher/state/pg_leases.py holds the operations on them;
-- watcher/state/shards.py says which shard a target falls in.
--
-- One lease row per shard, made here once for all 1024 (watcher.state.shards.SHARDS): owner
-- (NULL: free), epoch (grows by one on every takeover: a fenced write names the epoch it
-- holds), expires_at (seconds since the epoch by the DATABASE's clock,
-- extract(epoch from clock_timestamp()), never a caller's). shard is bigint as every SQLite
-- INTEGER is here (0001's types).
CREATE TABLE shard_leases (
    shard bigint PRIMARY KEY,
    owner text,
    epoch bigint NOT NULL DEFAULT 0,
    expires_at double precision
);
INSERT INTO shard_leases (shard) SELECT generate_series(0, 1023);

-- Each running instance's heartbeat (the live ones set the fair share; `watcher status`).
CREATE TABLE instances (
    instance_id text PRIMARY KEY,
    host text NOT NULL,
    pid bigint NOT NULL,
    started_at double precision NOT NULL,
    renewed_at double precision NOT NULL
);
