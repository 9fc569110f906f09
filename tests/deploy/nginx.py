"""Debian's nginx running deploy/nginx/eventlog.conf, byte for byte, for the tests.

The deployment's own file is included by its path in the repository; around it, this
writes only what a deployment's main `nginx.conf` holds, pointed at a temporary prefix
(pid, logs, temp folders; one process, in the foreground), and the two deployment-specific
files eventlog.conf includes: where the replicas are (`eventlog.d/replicas.conf`) and
where nginx listens (`eventlog.d/listen.conf`: 127.0.0.1, a free port).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.needs import missing
from tests.support.processes import REPO, free_port

CONFIG = REPO / "deploy" / "nginx" / "eventlog.conf"
START_TIMEOUT = 30.0

_MAIN = """\
# The test's main file (tests/deploy/nginx.py): a temporary prefix, one foreground process.
daemon off;
master_process off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;

events {{
    worker_connections 1024;
}}

http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/temp/body;
    proxy_temp_path {prefix}/temp/proxy;
    fastcgi_temp_path {prefix}/temp/fastcgi;
    uwsgi_temp_path {prefix}/temp/uwsgi;
    scgi_temp_path {prefix}/temp/scgi;

    include {config};
}}
"""


def binary() -> str | None:
    """Where Debian's nginx is, or None."""
    return shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None
    )


def require_nginx() -> str:
    """The nginx binary; skip without it, or fail under CI=true, where these tests must run."""
    found = binary()
    if found is None:
        missing("nginx for the load-balancer tests", "it is not installed (run `make test-tools`)")
    return found


@dataclass
class Nginx:
    """nginx in front of `replicas` (base URLs), from a prefix of its own."""

    executable: str
    prefix: Path
    replicas: list[str]
    port: int = 0
    config: Path = CONFIG  # another `http`-context file of deploy/nginx (gateway.conf)
    folder: str = "eventlog.d"  # the folder of that file's two includes

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        for folder in (self.folder, "temp"):
            (self.prefix / folder).mkdir(parents=True, exist_ok=True)
        main = _MAIN.format(prefix=self.prefix, config=self.config)
        (self.prefix / "nginx.conf").write_text(main)
        servers = "".join(f"server {url.removeprefix('http://')};\n" for url in self.replicas)
        (self.prefix / self.folder / "replicas.conf").write_text(servers)
        (self.prefix / self.folder / "listen.conf").write_text(f"listen 127.0.0.1:{self.port};\n")

    @property
    def url(self) -> str:
        """Where nginx listens."""
        return f"http://127.0.0.1:{self.port}"

    def command(self, *extra: str) -> list[str]:
        """nginx with this prefix and its main file."""
        return [
            self.executable,
            "-p",
            str(self.prefix),
            "-c",
            str(self.prefix / "nginx.conf"),
            *extra,
        ]

    def check(self) -> subprocess.CompletedProcess[str]:
        """`nginx -t`: the configuration is read and checked, nothing is started."""
        return subprocess.run(self.command("-t"), capture_output=True, text=True, check=False)

    def error_log(self) -> str:
        """nginx's error log so far."""
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @contextmanager
    def running(self) -> Iterator[str]:
        """Run nginx until the block ends; yields its base URL once it accepts connections."""
        log = (self.prefix / "stderr.log").open("wb")
        process = subprocess.Popen(self.command(), stdout=log, stderr=log)
        try:
            self._wait_listening(process)
            yield self.url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()

    def _wait_listening(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                stderr = (self.prefix / "stderr.log").read_text(errors="replace")
                raise RuntimeError(
                    f"nginx exited with {process.returncode}:\n{stderr}{self.error_log()}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)  # a process we do not control: there is no event to await
        raise TimeoutError(f"nginx did not listen on {self.port} in {START_TIMEOUT}s")
