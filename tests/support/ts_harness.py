"""Drive the official TypeScript MCP clients (`tests/support/ts_client/client.mjs`) from pytest.

Both generations: `v1` is `@modelcontextprotocol/sdk` 1.32.2, `v2` is
`@modelcontextprotocol/client` 2.4.0 (negotiating 2025-11-25, the newest revision with
sessions and `Last-Event-ID` resumption). `ensure_ts_client()` installs the harness's
locked npm dependencies (`npm ci`) when they are missing, so a fresh clone works; without
Node it skips, except under `CI=true`. `ts_client(url, program, sdk=...)` runs the harness
as a process and reads the JSON lines it prints as they come, so a test can wait for a
moment of the call (a token, a progress step) and act on the servers then. `py_client`
runs the official Python client (`tests.support.py_client`) on the same program language,
and `mcp_client(kind, ...)` picks one of `CLIENTS`, so one test body drives all three.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from tests.support.node import ensure_node_project

HARNESS = Path(__file__).resolve().parent / "ts_client"
REPO = HARNESS.parents[2]
SDKS = {
    "v1": ("@modelcontextprotocol/sdk", "1.32.2"),
    "v2": ("@modelcontextprotocol/client", "2.4.0"),
}
"""Each SDK generation the harness drives: its npm package and the version locked."""
Line = dict[str, Any]


def ensure_ts_client() -> str:
    """The path of `node`, with the harness's dependencies installed (`npm ci`)."""
    return ensure_node_project(HARNESS, dict(SDKS.values()), "the TypeScript client tests")


class TsClient:
    """The harness's output so far, line by line, and a way to wait for a line."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[Line] = []
        self.stderr = b""
        self.closed = False
        self._changed = anyio.Event()

    def of(self, op: int, event: str) -> list[Line]:
        """The lines of operation `op` with this event."""
        return [line for line in self.lines if line["op"] == op and line["event"] == event]

    async def until(self, check: Callable[[TsClient], bool], within: float = 30.0) -> None:
        """Wait until `check(self)` holds (the harness's output is awaited, never polled)."""
        with anyio.fail_after(within):
            while not check(self):
                if self.closed:
                    raise AssertionError(f"the TS client ended: {self.lines}\n{self.stderr!r}")
                await self._changed.wait()

    async def go_on(self, token: str | None = None) -> None:
        """Let a `wait` operation go on (handing it `token` for a `{"given": true}` resume)."""
        assert self.process.stdin is not None
        line = "go" if token is None else f"go {token}"
        await self.process.stdin.send(f"{line}\n".encode())

    async def finished(self, within: float = 60.0) -> list[Line]:
        """Every line, once the harness has exited."""
        await self.until(lambda c: any(line["event"] == "exit" for line in c.lines), within)
        return self.lines

    async def _read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                self.lines.append(json.loads(raw))
            self._changed.set()
            self._changed = anyio.Event()
        self.closed = True
        self._changed.set()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk


@asynccontextmanager
async def ts_client(
    url: str, program: list[dict[str, Any]], *, sdk: str = "v1"
) -> AsyncIterator[TsClient]:
    """Run the harness with SDK generation `sdk` against the MCP server at `url` (`/mcp`)."""
    node = ensure_ts_client()
    args = [node, str(HARNESS / "client.mjs"), sdk, f"{url}/mcp", json.dumps(program)]
    async with _program_client(args, HARNESS, "the TS client") as client:
        yield client


@asynccontextmanager
async def py_client(url: str, program: list[dict[str, Any]]) -> AsyncIterator[TsClient]:
    """The official Python client (`tests.support.py_client`) running the same program
    language against the MCP server at `url` (`/mcp`), its lines read the same way."""
    args = [sys.executable, "-m", "tests.support.py_client", f"{url}/mcp", json.dumps(program)]
    async with _program_client(args, REPO, "the Python client") as client:
        yield client


CLIENTS = ("py", "ts-v1", "ts-v2")
"""Every official client the matrix drives: the Python SDK's, TypeScript v1 and v2."""


def progress_of(run: TsClient, op: int) -> list[int]:
    """The progress values operation `op` of a TypeScript client's run saw, in order."""
    return [int(line["progress"]) for line in run.of(op, "progress")]


def mcp_client(
    kind: str, url: str, program: list[dict[str, Any]]
) -> AbstractAsyncContextManager[TsClient]:
    """The client `kind` of `CLIENTS` running `program` against the server at `url`."""
    if kind == "py":
        return py_client(url, program)
    return ts_client(url, program, sdk=kind.removeprefix("ts-"))


@asynccontextmanager
async def _program_client(args: list[str], cwd: Path, what: str) -> AsyncIterator[TsClient]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    async with await anyio.open_process(args, cwd=cwd, env=env) as process:
        client = TsClient(process)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client._read)
            tasks.start_soon(client._read_stderr)
            try:
                yield client
            except BaseException:
                process.kill()
                raise
            finally:
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                tasks.cancel_scope.cancel()
        if process.returncode not in (0, None, -9):
            raise AssertionError(f"{what} failed:\n{client.stderr.decode()}")
