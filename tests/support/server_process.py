"""A real server process (`python -m app serve`) that tests can start, kill -9 and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


def soak_enabled() -> bool:
    """Whether the long variants run (`EVENTLOG_SOAK=1`, as `make soak` sets it)."""
    return os.environ.get("EVENTLOG_SOAK", "") not in ("", "0")


class ServerProcess:
    """One service process on 127.0.0.1; `start()` again after `kill()` restarts it."""

    def __init__(
        self,
        database_url: str,
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.log_path = log_path
        self.extra_env = env or {}
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """Where the process listens."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running process's id, or None."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the process and wait until `/healthz` answers."""
        assert self._process is None, "already running"
        env = {
            **os.environ,
            "EVENTLOG_DATABASE_URL": self.database_url,
            "EVENTLOG_LOG_LEVEL": "info",
            **self.extra_env,
        }
        command = [sys.executable, "-m", "app", "serve", "--port", str(self.port)]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_until_healthy()

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"server exited at start; log:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server did not start in {START_TIMEOUT}s; log:\n{self.log()}")

    def kill(self) -> None:
        """`kill -9` the process: no shutdown, no flush, no goodbye."""
        if self._process is None:
            return
        if self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
        self._process.wait(timeout=10)
        self._process = None

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), or kill after 10 s."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self._process = None

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
