-- What fires now: the latest transition of each rule and subject, when it is not a resolution;
-- kept with every alert insert (watcher/state/alerts.py). /metrics and /healthz read it at
-- every scrape, and retention keeps these alerts: the cost is the firing alerts', not the
-- history's.
CREATE TABLE firing_alerts (
    rule TEXT NOT NULL,
    subject TEXT NOT NULL,
    alert_id INTEGER NOT NULL,
    PRIMARY KEY (rule, subject)
) STRICT;
INSERT INTO firing_alerts (rule, subject, alert_id)
SELECT a.rule, a.subject, a.id FROM alerts a JOIN (
    SELECT MAX(id) AS id FROM alerts WHERE reason IN ('firing', 'repeat', 'resolved')
    GROUP BY rule, subject
) latest ON latest.id = a.id
WHERE a.reason != 'resolved';

-- The outbox figures of /metrics and /healthz: pending and the oldest of them, dead.
CREATE INDEX deliveries_status_created ON deliveries (status, created_at);

-- The targets the daemon found named by no rule, since when (a table of its own: the targets
-- table keeps its shape).
CREATE TABLE unwatched_targets (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    since REAL NOT NULL,
    PRIMARY KEY (source, target)
) STRICT;
