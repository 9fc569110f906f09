# syntax=docker/dockerfile:1
# mcp-eventlog: install the release's wheel into a virtualenv in one stage, run it as a
# non-root user in a slim one. One artifact for pip users and the image: `make docker` runs
# `make dist` first, and this installs dist/'s wheel, which carries the migrations and the
# console. Keep in step with the Makefile (same wheel, no extras, the same constraints).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY constraints.txt /tmp/release/
COPY dist/mcp_eventlog-*-py3-none-any.whl dist/mcp_eventlog_client-*-py3-none-any.whl /tmp/release/
# The service (no dev or MCP extras) and the Python client of its version, which it depends
# on (the MCP storage convention of its gateway), at the versions the tests ran on.
RUN pip install --no-compile -c /tmp/release/constraints.txt /tmp/release/mcp_eventlog-*-py3-none-any.whl /tmp/release/mcp_eventlog_client-*-py3-none-any.whl

FROM python:3.11-slim
RUN groupadd --system --gid 10001 eventlog \
 && useradd --system --uid 10001 --gid eventlog --home-dir /srv --shell /usr/sbin/nologin eventlog \
 && mkdir -p /data /srv \
 && chown eventlog:eventlog /data
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EVENTLOG_DATABASE_URL=sqlite+aiosqlite:////data/eventlog.db \
    EVENTLOG_HOST=0.0.0.0 \
    EVENTLOG_PORT=8080
WORKDIR /srv
USER eventlog
VOLUME ["/data"]
EXPOSE 8080
# Ready means the database answers and its schema is at the newest migration.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; url = 'http://127.0.0.1:%s/readyz' % os.environ.get('EVENTLOG_PORT', '8080'); sys.exit(0 if urllib.request.urlopen(url, timeout=2).status == 200 else 1)"]
# `serve` follows the dialect's rule: it migrates a SQLite file first; on PostgreSQL it does
# not (replicas must not each migrate as they start): run `mcp-eventlog migrate` once per
# release, as a job — it holds an advisory lock, so even runs that race are safe. Then
# `serve` runs as PID 1, so SIGTERM from `docker stop` reaches uvicorn, which drains
# in-flight requests.
CMD ["mcp-eventlog", "serve"]
