"""Running as a service: the scheduler of sweeps, systemd's notify protocol (coming: /metrics,
/healthz)."""
