"""Running as a service: systemd's notify protocol (and, coming, reload, /metrics, /healthz)."""
