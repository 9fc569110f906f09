"""Real processes for the end-to-end tests: the event-log service and the MCP server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path, ready_url: str) -> Iterator[None]:
    """Run `python <args>` until the block ends; it is ready once `ready_url` answers."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
    full_env.update(env, PYTHONPATH=str(REPO))
    with log.open("wb") as output:
        child = subprocess.Popen(
            [sys.executable, *args], cwd=REPO, env=full_env, stdout=output, stderr=output
        )
        try:
            _wait_ready(ready_url, child, log)
            yield
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _wait_ready(url: str, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{url}: the process exited:\n{log.read_text()}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            # Polling a process we do not control: there is no event to await.
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer in 30 s:\n{log.read_text()}")


@contextmanager
def eventlog_service(database_url: str, workdir: Path, port: int | None = None) -> Iterator[str]:
    """`python -m app serve` on `port` (default: a free one); yields its base URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"EVENTLOG_DATABASE_URL": database_url, "EVENTLOG_MIGRATE_ON_START": "true"}
    args = ["-m", "app", "serve", "--port", str(port)]
    log = workdir / f"eventlog-{port}-{time.monotonic_ns()}.log"
    with process(args, env, log, f"{url}/healthz"):
        yield url


@contextmanager
def mcp_server(eventlog_url: str, workdir: Path, *extra: str) -> Iterator[str]:
    """The test MCP server (`tests.support.mcp_server`); yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [
        "-m",
        "tests.support.mcp_server",
        "--port",
        str(port),
        "--eventlog",
        eventlog_url,
        *extra,
    ]
    with process(args, {}, workdir / f"mcp-{port}.log", url):
        yield url
