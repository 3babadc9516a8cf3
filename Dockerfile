# watcher in a container. State goes to the /state volume (a folder: SQLite WAL needs it).
#   docker build -t watcher .
#   docker run -d --name watcher -v watcher-state:/state -v $PWD/watcher.yaml:/etc/watcher/watcher.yaml:ro \
#       -e RPC_API_KEY=... watcher
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    WATCHER_CONFIG=/etc/watcher/watcher.yaml WATCHER_STATE_PATH=/state/watcher.db
RUN useradd --system --uid 10001 --home /state watcher && mkdir -p /state /etc/watcher \
    && chown watcher /state
WORKDIR /opt/watcher
COPY pyproject.toml README.md ./
COPY watcher ./watcher
COPY rules ./rules
RUN pip install --no-cache-dir .
USER watcher
VOLUME ["/state"]
# The daemon handles SIGTERM itself (it is PID 1 here): in-flight work finishes, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["watcher"]
CMD ["run"]
