"""Running as a service: the scheduler and its sweeps, the supervisor, systemd's notify
protocol, /metrics and /healthz, the heartbeat, the leases and ``watcher status``."""
