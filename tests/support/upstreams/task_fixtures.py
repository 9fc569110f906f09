"""An upstream with NO task support: the conformance suite's task fixtures as plain tools.

Run as `python -m tests.support.upstreams.task_fixtures --port P`. Written with the
official Python SDK (`mcp` 2.3, which speaks 2026-07-28 and its input-required rounds);
it knows nothing of `io.modelcontextprotocol/tasks`: the gateway in front of it is the
task host. The tools are the fixtures the `tasks-*` scenarios of
`@modelcontextprotocol/conformance` name:

- `greet(name)` → `Hello, {name}!`;
- `slow_compute(seconds, label)` → sleeps `seconds` (reporting progress each second),
  then `computed {label}`;
- `failing_job()` → after ~1 s a tool error (`isError: true`);
- `protocol_error_job()` → a JSON-RPC error;
- `confirm_delete(filename)` → one `elicitation/create` round, then `deleted {filename}`;
- `multi_input()` → two `elicitation/create` requests at once, then both answers;
- `test_tool_with_task()` → one round asking for `user_name`, then `Hello, {name}!`.

`GET /test/calls` answers how many calls of each tool started and how many were cut
(their connection closed before the tool finished) — what a gateway's cancel did.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

server = MCPServer("task-fixtures")
calls: Counter[str] = Counter()


def _elicit(message: str, field: str, kind: str = "string") -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(
            message=message,
            requested_schema={
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field],
            },
        )
    )


def _answer(ctx: Context, key: str) -> dict[str, Any] | None:
    """The content of the requester's answer to input request `key` (None: not given)."""
    responses = ctx.input_responses or {}
    answer = responses.get(key)
    if answer is None:
        return None
    dumped = answer.model_dump() if hasattr(answer, "model_dump") else answer
    if not isinstance(dumped, dict):
        return {}
    content = dumped.get("content")
    return content if isinstance(content, dict) else {}


@server.tool()
async def greet(name: str) -> str:
    """Say hello."""
    calls["greet"] += 1
    return f"Hello, {name}!"


@server.tool()
async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
    """Sleep `seconds` (progress each second), then answer."""
    calls["slow_compute"] += 1
    try:
        elapsed = 0.0
        while elapsed < seconds:
            step = min(1.0, seconds - elapsed)
            await anyio.sleep(step)
            elapsed += step
            await ctx.report_progress(elapsed, seconds, f"{label}: {elapsed:g}s")
    except anyio.get_cancelled_exc_class():
        calls["slow_compute:cut"] += 1
        raise
    return f"computed {label}"


@server.tool()
async def failing_job() -> str:
    """Fail as a tool (isError) after about a second."""
    calls["failing_job"] += 1
    await anyio.sleep(1.0)
    raise ToolError("the job failed")


@server.tool()
async def protocol_error_job() -> str:
    """Fail with a JSON-RPC error."""
    calls["protocol_error_job"] += 1
    raise MCPError(-32603, "the job crashed")


@server.tool()
async def confirm_delete(ctx: Context, filename: str = "file.txt") -> str | InputRequiredResult:
    """Ask for a confirmation, then delete (pretend)."""
    calls["confirm_delete"] += 1
    answer = _answer(ctx, "confirm")
    if answer is None:
        ask = _elicit(f"Delete {filename}?", "confirm", "boolean")
        return InputRequiredResult(input_requests={"confirm": ask})
    return f"deleted {filename}" if answer.get("confirm") else f"kept {filename}"


@server.tool()
async def multi_input(ctx: Context) -> str | InputRequiredResult:
    """Ask two questions at once; answer once both are answered."""
    calls["multi_input"] += 1
    name, confirm = _answer(ctx, "name"), _answer(ctx, "confirm")
    if name is None or confirm is None:
        asks = {"name": _elicit("Your name?", "name"), "confirm": _elicit("Sure?", "confirm")}
        return InputRequiredResult(input_requests=asks)
    return f"{name.get('name')} confirmed {confirm.get('confirm')}"


@server.tool()
async def test_tool_with_task(ctx: Context) -> str | InputRequiredResult:
    """Ask for `user_name`, then greet it."""
    calls["test_tool_with_task"] += 1
    answer = _answer(ctx, "user_name")
    if answer is None:
        return InputRequiredResult(input_requests={"user_name": _elicit("Your name?", "name")})
    return f"Hello, {answer.get('name')}!"


@server.custom_route("/test/calls", methods=["GET"])
async def calls_seen(request: Request) -> Response:
    """The calls started (and cut) per tool."""
    return JSONResponse(dict(calls))


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = server.streamable_http_app(host="127.0.0.1", stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
