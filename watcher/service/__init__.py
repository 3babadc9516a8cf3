"""Running as a service: the scheduler and its sweeps, the path of one target's observation,
the supervisor, systemd's notify protocol, /metrics and /healthz, the heartbeat, the leases
and ``watcher status``."""
