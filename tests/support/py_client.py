"""The official Python MCP client (`mcp`, the version in constraints), driven like the TS harness.

`python -m tests.support.py_client <url> <program.json>` runs the same program language as
`tests/support/ts_client/client.mjs` (operations `call`, `resume`, `wait`; see there) on
one MCP session and prints the same JSON lines (`{"op": i, "event": ..., "ms": ...}`), so
one test body drives the Python client and both TypeScript generations alike
(`tests.support.ts_harness.mcp_client`). The transport reconnects by itself with
`Last-Event-ID` when a stream ends or breaks before the response (the SDK's own
behaviour); `drop_after_tokens` closes the client's connections once it holds K tokens,
leaving the session open on the server.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ClientMessageMetadata

PROTOCOL = "2025-11-25"


class Driver:
    """One program's run: the session, the tokens of each operation, the printed lines."""

    def __init__(self, url: str, program: list[dict[str, Any]]) -> None:
        self.url, self.program = url, program
        self.tokens: list[list[str]] = [[] for _ in program]
        self.started = time.monotonic()
        self.session_id: str | None = None
        self.given: str | None = None
        self.main: tuple[ClientSession, AsyncExitStack] | None = None
        self.dropped: set[int] = set()
        self.seen = [0 for _ in program]  # progress notifications printed, per operation
        self.changed = anyio.Event()

    def print(self, op: int, event: str, **fields: Any) -> None:
        ms = int((time.monotonic() - self.started) * 1000)
        sys.stdout.write(json.dumps({"op": op, "event": event, "ms": ms, **fields}) + "\n")
        sys.stdout.flush()

    @asynccontextmanager
    async def _client(
        self, join: bool, op: int, on_message: Any = None
    ) -> AsyncIterator[ClientSession]:
        ids: list[str] = []

        async def remember(response: httpx2.Response) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid and not ids:
                ids.append(sid)

        headers = (
            {"mcp-session-id": self.session_id, "mcp-protocol-version": PROTOCOL}
            if join and self.session_id
            else {}
        )
        http = httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [remember]})
        async with (
            http,
            streamable_http_client(self.url, http_client=http, terminate_on_close=False) as (
                read,
                write,
            ),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            if not join:
                await session.initialize()
                self.session_id = ids[0] if ids else None
                self.print(op, "session", session=self.session_id)
            yield session

    async def _send(
        self, session: ClientSession, op: int, spec: dict[str, Any], token: str | None, **hooks: Any
    ) -> None:
        arguments = spec.get("arguments", {"n": 0}) if token is None else {"n": 0}
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name="progress", arguments=arguments)
        )

        async def on_token(value: str) -> None:
            if op in self.dropped:
                return  # arrived after the drop, on a connection about to close: not seen
            self.tokens[op].append(value)
            self.print(op, "token", token=value)
            if "on_token" in hooks:
                await hooks["on_token"](len(self.tokens[op]))

        async def on_progress(progress: float, _total: float | None, _message: str | None) -> None:
            if op in self.dropped:
                return
            self.seen[op] += 1
            self.print(op, "progress", progress=progress)
            self.changed.set()
            self.changed = anyio.Event()

        metadata = ClientMessageMetadata(
            resumption_token=token, on_resumption_token_update=on_token
        )
        try:
            with anyio.fail_after(spec.get("timeout_ms", 20000) / 1000):
                # A resumed request waits under a new id: the replayed notifications carry
                # the original request's progress token, so `resume` counts them from the
                # session's message handler instead.
                result = await session.send_request(
                    request,
                    types.CallToolResult,
                    metadata=metadata,
                    progress_callback=on_progress if token is None else None,
                )
        except MCPError as error:
            self.print(
                op,
                "error",
                name="MCPError",
                code=error.error.code,
                message=error.error.message,
                data=error.error.data,
            )
            return
        except TimeoutError:
            self.print(op, "error", name="TimeoutError", code=None, message="timed out", data=None)
            return
        content = result.content[0] if result.content else None
        text = content.text if isinstance(content, types.TextContent) else ""
        self.print(
            op,
            "result",
            text=None if len(text) > 200 else text,
            length=len(text),
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            isError=bool(result.is_error),
        )

    async def call(self, op: int, spec: dict[str, Any]) -> None:
        if self.main is None:
            stack = AsyncExitStack()
            session = await stack.enter_async_context(self._client(False, op))
            self.main = (session, stack)
        session, stack = self.main
        drop = spec.get("drop_after_tokens")
        if drop is None:
            await self._send(session, op, spec, None)
            return
        async with anyio.create_task_group() as tasks:

            async def on_token(count: int) -> None:
                if count < drop or op in self.dropped:
                    return
                # The SDK hands a message on before its token: let the session's reader
                # deliver the progress of every token held (all but the priming event's).
                with anyio.move_on_after(2):
                    while self.seen[op] < count - 1:
                        await self.changed.wait()
                self.dropped.add(op)
                self.print(op, "dropped", token=self.tokens[op][-1])
                tasks.cancel_scope.cancel()  # the connection goes, the session stays

            tasks.start_soon(lambda: self._send(session, op, spec, None, on_token=on_token))
        self.main = None
        await stack.aclose()  # in the scope it was entered in (anyio's rule)

    async def resume(self, op: int, spec: dict[str, Any]) -> None:
        wanted = spec["token"]
        if isinstance(wanted, str):
            token = wanted
        elif wanted.get("given"):
            token = self.given or ""
        else:
            token = self.tokens[wanted["call"]][wanted["index"]]
        self.print(op, "resuming", token=token)

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ProgressNotification):
                self.print(op, "progress", progress=message.params.progress)

        try:
            async with self._client(True, op, on_message) as session:
                await self._send(session, op, spec, token)
        except Exception as error:
            # A refusal the gateway can only answer as problem+json (no request id known)
            # makes the SDK's transport raise out of the client: that is what a caller sees.
            leaf = error
            while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
                leaf = leaf.exceptions[0]
            self.print(
                op, "error", name=type(leaf).__name__, code=None, message=str(leaf), data=None
            )

    async def run(self) -> None:
        for op, spec in enumerate(self.program):
            if spec["op"] == "call":
                await self.call(op, spec)
            elif spec["op"] == "resume":
                await self.resume(op, spec)
            elif spec["op"] == "wait":
                self.print(op, "waiting")
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                parts = line.split()
                self.given = parts[1] if len(parts) > 1 else self.given
            else:
                raise ValueError(f"unknown op {spec['op']}")
        if self.main is not None:
            await self.main[1].aclose()
        self.print(len(self.program), "exit", sdk="py")


def main() -> None:
    """Run the program of argv[2] against the MCP endpoint of argv[1]."""
    url, program = sys.argv[1], json.loads(sys.argv[2])
    anyio.run(Driver(url, program).run)


if __name__ == "__main__":
    main()
