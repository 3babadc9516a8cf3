"""Real parts for tests and benchmarks, shipped with the package (as ``structlog.testing`` or
``aiohttp.test_utils`` are): nothing in ``watcher`` imports them.

- ``daemon``: the real ``watcher run`` as a subprocess, and the settings file it reads;
- ``receivers``: a real JSON webhook listener and a real SMTP server on loopback;
- ``postgres``: a throwaway PostgreSQL server in a temporary folder;
- ``prometheus``, ``alertmanager``: the real Prometheus and Alertmanager binaries, started on
  loopback;
- ``net``: a free loopback port, a GET that tells "not listening" apart.

They need the ``dev`` extra (``pip install -e '.[dev]'``: freezegun, aiosmtpd) and, for
``postgres``, ``prometheus`` and ``alertmanager``, the server binaries
(``deploy/ensure-postgresql``, ``deploy/ensure-monitoring``).
"""
