# watcher in a container. State goes to the /state volume (a folder: SQLite's WAL needs it).
#   docker build -t watcher .
#   docker run -d --name watcher -v watcher-state:/state \
#       -v "$PWD/watcher.yaml:/etc/watcher/watcher.yaml:ro" -e RPC_API_KEY=... watcher
# Dependencies come from deploy/requirements.lock (pinned, hash-checked; `make lock` renews it).

# -- build: wheels for the pinned set and for watcher itself --------------------------------
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY deploy/requirements.lock ./
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY watcher ./watcher
RUN /opt/venv/bin/pip install --no-deps . \
    && /opt/venv/bin/pip uninstall --yes pip setuptools

# -- run: the interpreter, the venv, nothing else -------------------------------------------
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH \
    WATCHER_CONFIG=/etc/watcher/watcher.yaml WATCHER_STATE_PATH=/state/watcher.db
RUN groupadd --system --gid 10001 watcher \
    && useradd --system --uid 10001 --gid 10001 --home-dir /state --no-create-home watcher \
    && mkdir -p /state /etc/watcher && chown 10001:10001 /state
COPY --from=build /opt/venv /opt/venv
COPY rules /etc/watcher/rules
USER 10001:10001
VOLUME ["/state"]
# The daemon's own view of its health, from its state database (no RPC key needed): exits 1
# while every poll of a source's last round failed or the outbox does not drain.
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
    CMD ["watcher", "status", "--health"]
# The daemon handles SIGTERM itself (it is PID 1 here): in-flight work finishes, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["watcher"]
CMD ["run"]
