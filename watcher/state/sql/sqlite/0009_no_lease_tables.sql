-- The lease tables of the PostgreSQL engine, which version 6 made here before it made nothing:
-- one instance owns a SQLite file and leases nothing.
DROP TABLE IF EXISTS shard_leases;
DROP TABLE IF EXISTS instances;
