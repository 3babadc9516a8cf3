"""The watcher's version: the installed package's (``version`` in pyproject.toml), read from its
metadata, so that no module imports the root package for it (the User-Agent of RPC calls,
``watcher_build_info`` in /metrics, ``watcher --version``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("watcher")
except PackageNotFoundError:  # a source tree put on sys.path by hand, not installed
    __version__ = "0+unknown"
