"""The gateway's upstreams: unmodified MCP servers with NO event store, one per SDK or framework.

- `python`: the official Python SDK's server (`python_server.py`, gwcore's),
- `ts-v1`: `@modelcontextprotocol/sdk` 1.32.2, `StreamableHTTPServerTransport`,
- `ts-v2`: `@modelcontextprotocol/server` 2.4.0, the legacy session path
  (`WebStandardStreamableHTTPServerTransport` with a session id generator),
- `fastmcp`: the FastMCP framework (`fastmcp` from PyPI, pinned in constraints.txt).

Each serves `/mcp` with the one tool of `contract.py`. `upstream(name, workdir)` runs one
as a process on a free port and yields its base URL; `ensure_ts_server()` installs the
TypeScript servers' locked npm dependencies (`npm ci`) when they are missing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.node import ensure_node_project
from tests.support.processes import ServerProcess, free_port

HERE = Path(__file__).resolve().parent
TS_SERVER = HERE / "ts_server"
UPSTREAMS = ("python", "ts-v1", "ts-v2", "fastmcp")
TS_PACKAGES = {"@modelcontextprotocol/sdk": "1.32.2", "@modelcontextprotocol/server": "2.4.0"}


def ensure_ts_server() -> str:
    """The path of `node`, with the TypeScript servers' dependencies installed (`npm ci`)."""
    return ensure_node_project(TS_SERVER, TS_PACKAGES, "the TypeScript upstreams")


def upstream_process(name: str, workdir: Path, port: int | None = None) -> ServerProcess:
    """The upstream `name` of `UPSTREAMS` as a (not yet started) process on `port`."""
    port = port or free_port()
    log = workdir / f"upstream-{name}-{port}.log"
    if name == "python":
        argv = ["-m", "tests.support.upstreams.python_server", "--port", str(port)]
    elif name == "fastmcp":
        argv = ["-m", "tests.support.upstreams.fastmcp_server", "--port", str(port)]
    elif name in ("ts-v1", "ts-v2"):
        node = ensure_ts_server()
        script = str(TS_SERVER / "server.mjs")
        server = ServerProcess.program([], port=port, log_path=log)
        server.argv = (script, name.removeprefix("ts-"), str(port))
        server.executable = node
        server.start_timeout = 120.0
        return server
    else:
        raise ValueError(f"unknown upstream {name!r}")
    server = ServerProcess.program(argv, port=port, log_path=log)
    server.executable = sys.executable
    server.start_timeout = 120.0  # a loaded machine: imports alone may take long
    return server


@contextmanager
def upstream(name: str, workdir: Path) -> Iterator[str]:
    """The upstream `name` running on a free port; yields its base URL."""
    with upstream_process(name, workdir) as server:
        yield server.base_url


def hostile_upstream_process(workdir: Path, port: int | None = None) -> ServerProcess:
    """`hostile_upstream.py` (its modes are its module's) as a process, not yet started."""
    port = port or free_port()
    argv = ["-m", "tests.support.upstreams.hostile_upstream", "--port", str(port)]
    return ServerProcess.program(argv, port=port, log_path=workdir / f"hostile-{port}.log")


async def open_gate(base_url: str, name: str) -> None:
    """Let what waits on the gate `name` go on: a tool or a replay of the server at `base_url`
    (the Python upstream and `tests.support.mcp_server` both serve `POST /test/gates/<name>`)."""
    async with httpx.AsyncClient() as http:
        (await http.post(f"{base_url}/test/gates/{name}")).raise_for_status()
