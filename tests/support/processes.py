"""Real server processes, for the tests where the process boundary matters: one way to run one.

`ServerProcess` is the one helper: `python -m app serve` (or, with `ServerProcess.program`,
any Python program that serves HTTP, such as the test MCP server) on 127.0.0.1 and a free
port, with the environment the test gives it (`EVENTLOG_*` settings; the caller's own
`EVENTLOG_*` variables are never passed on), its output in a log file. `start()` waits
until it answers; `stop()` ends it (SIGTERM, then SIGKILL after 10 s); `kill()` is
`kill -9`; `start()` again restarts it on the same port; `log()` and `rss()` read it.
`environment` makes the child's environment from the test's settings (by default
`child_environment`; the release tests give one that cannot reach the checkout), and the
bench starts its processes under test with it too.

The context managers below are its common shapes: `running_server(env)` yields a URL,
`eventlog_service(database_url, workdir)` a migrating service, `mcp_server(...)` the test
MCP server in front of one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from tests.support.process_memory import rss

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_environment(env: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its `EVENTLOG_*` variables, then `env`.

    A developer's own `EVENTLOG_KEYS` or database URL must not leak into a test's server.
    """
    full = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
    return {**full, **env, "PYTHONPATH": str(REPO)}


class StartedInWith:
    """`with thing:` starts it, and stops it on the way out (whatever happened inside)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _error: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.stop()


class ServerProcess(StartedInWith):
    """One server process on 127.0.0.1; `start()` again after `stop()`/`kill()` restarts it.

    By default `python -m app serve --port PORT *args` on `database_url` (when given; else
    `EVENTLOG_DATABASE_URL` of `env`, or the service's default file in `cwd`), ready once
    `/healthz` answers 200. Also a context manager: started on entry, stopped on exit.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        cwd: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.database_url = database_url
        self.log_path = log_path
        self.extra_env = dict(env or {})
        self.cwd = cwd or REPO
        self.port = port or free_port()
        self.argv: tuple[str, ...] = ("-m", "app", "serve", "--port", str(self.port), *args)
        self.executable = sys.executable  # another program (`node`) for a non-Python server
        self.start_timeout = START_TIMEOUT  # more for a slow start on a loaded machine
        self.ready_path = "/healthz"
        self.ready_status: int | None = 200
        self.environment: Callable[[Mapping[str, str]], dict[str, str]] = child_environment
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def program(
        cls,
        argv: Sequence[str],
        *,
        port: int,
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> ServerProcess:
        """`python *argv`, a program serving HTTP on `port`: ready once `/` answers at all."""
        server = cls(log_path=log_path, env=env, port=port)
        server.argv = tuple(argv)
        server.ready_path, server.ready_status = "/", None
        return server

    @property
    def base_url(self) -> str:
        """Where the process listens."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running process's id, or None."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the process and wait until it answers (`START_TIMEOUT`)."""
        assert self._process is None, "already running"
        database = {"EVENTLOG_DATABASE_URL": self.database_url} if self.database_url else {}
        env = self.environment({**database, **self.extra_env})
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [self.executable, *self.argv],
                cwd=self.cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        url = self.base_url + self.ready_path
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RuntimeError(f"{url}: the server exited with {code} at start:\n{self.log()}")
            try:
                status = httpx.get(url, timeout=1.0).status_code
                if self.ready_status is None or status == self.ready_status:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling a process we do not control: there is no event to await
        self.kill()
        raise TimeoutError(f"{url} did not answer in {self.start_timeout} s; log:\n{self.log()}")

    def kill(self) -> None:
        """`kill -9` the process: no shutdown, no flush, no goodbye."""
        if self._process is None:
            return
        if self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
        self._process.wait(timeout=STOP_TIMEOUT)
        self._process = None

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), or kill after `STOP_TIMEOUT`."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self._process = None

    def log(self) -> str:
        """Everything the process wrote so far (every start of it, in order)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rss(self) -> int:
        """The running process's resident set size now, in bytes."""
        assert self.pid is not None, "not running"
        return rss(self.pid)


@contextmanager
def running_server(
    env: Mapping[str, str], *, cwd: Path | None = None, args: Sequence[str] = ()
) -> Iterator[str]:
    """`mcp-eventlog serve` with the settings of `env`, on a free port; yields its base URL."""
    with (
        tempfile.TemporaryDirectory(prefix="eventlog-server-") as logs,
        ServerProcess(log_path=Path(logs) / "server.log", env=env, cwd=cwd, args=args) as server,
    ):
        yield server.base_url


@contextmanager
def eventlog_service(
    database_url: str,
    workdir: Path,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """The service on `database_url`, migrated on start, on `port` (default: a free one),
    logging into `workdir`; yields its base URL."""
    port = port or free_port()
    log = workdir / f"eventlog-{port}-{time.monotonic_ns()}.log"
    settings = {"EVENTLOG_MIGRATE_ON_START": "true", **(env or {})}
    with ServerProcess(database_url, log_path=log, env=settings, cwd=workdir, port=port) as server:
        yield server.base_url


def mcp_server_process(
    eventlog_url: str, workdir: Path, *extra: str, port: int | None = None
) -> ServerProcess:
    """The test MCP server (`tests.support.mcp_server`) storing its streams at
    `eventlog_url`, on `port` (default: a free one); not started."""
    port = port or free_port()
    argv = ["-m", "tests.support.mcp_server", "--port", str(port), "--eventlog", eventlog_url]
    log = workdir / f"mcp-{port}.log"
    return ServerProcess.program([*argv, *extra], port=port, log_path=log)


@contextmanager
def mcp_server(eventlog_url: str, workdir: Path, *extra: str) -> Iterator[str]:
    """The test MCP server (`tests.support.mcp_server`) storing its streams at `eventlog_url`;
    yields its base URL."""
    with mcp_server_process(eventlog_url, workdir, *extra) as server:
        yield server.base_url
