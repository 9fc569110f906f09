"""An upstream that streams many big events, as fast as the gateway reads them or at a set rate:
`python -m tests.support.upstreams.flood_upstream --port P`.

It speaks just enough Streamable HTTP to open a session (initialize answered as JSON with
an `Mcp-Session-Id`, notifications accepted with 202). A `tools/call` with arguments
`{"count": n, "size": s}` is answered as SSE: `n` progress notifications whose `message`
is `step <i> ` padded with `x` to `s` characters, then the result `flooded <n>`; with
`"pause_at": k` it stops after the `k`th until `POST /go`; with `"rate": r` it sends at
most `r` bytes a second. It writes no faster than the gateway reads (TCP back-pressure),
so whatever the gateway's client does not read piles up in the gateway, not here.
`GET /sent` answers how many notifications have been written so far.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from tests.support.upstreams import raw_server

sent = 0
go = asyncio.Event()


def _frame(message: dict[str, object]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def _head(status: str, content_type: str, extra: str = "", length: int | None = None) -> bytes:
    size = "" if length is None else f"content-length: {length}\r\n"
    return f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{extra}{size}\r\n".encode()


async def _flood(writer: asyncio.StreamWriter, request: dict[str, object]) -> None:
    global sent
    params = request.get("params")
    assert isinstance(params, dict)
    arguments = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken", 0)
    count, size = int(arguments.get("count", 1000)), int(arguments.get("size", 4096))
    pause, rate = int(arguments.get("pause_at", 0)), float(arguments.get("rate", 0))
    began, written = time.monotonic(), 0
    extra = "cache-control: no-cache\r\nconnection: close\r\n"
    writer.write(_head("200 OK", "text/event-stream", extra))
    for step in range(1, count + 1):
        text = f"step {step} "
        note = {"progress": step, "total": count, "progressToken": token}
        note["message"] = text + "x" * (size - len(text))
        frame = _frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        writer.write(frame)
        sent, written = sent + 1, written + len(frame)
        if step % 16 == 0 or step == pause:
            await writer.drain()
            if rate and (ahead := began + written / rate - time.monotonic()) > 0:
                await asyncio.sleep(ahead)
        if step == pause:
            await go.wait()
    result = {"content": [{"type": "text", "text": f"flooded {count}"}], "isError": False}
    writer.write(_frame({"jsonrpc": "2.0", "id": request["id"], "result": result}))


async def _answer(writer: asyncio.StreamWriter, method: str, path: str, body: bytes) -> None:
    if path == "/go":
        go.set()
    if method == "GET" or path == "/go":
        payload = json.dumps({"sent": sent}).encode()
        writer.write(_head("200 OK", "application/json", length=len(payload)) + payload)
        return
    request = json.loads(body)
    if "id" not in request:
        writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
        return
    if request.get("method") != "initialize":
        await _flood(writer, request)
        return
    result = {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "flood", "version": "0"},
    }
    payload = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
    session = f"mcp-session-id: {uuid.uuid4().hex}\r\n"
    writer.write(_head("200 OK", "application/json", session, len(payload)) + payload)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        method, path, *_ = lines[0].split(" ")
        await _answer(writer, method, path, body)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def main() -> None:
    """Serve on 127.0.0.1 (one request per connection: each answer closes it)."""
    raw_server.main(_handle)


if __name__ == "__main__":
    main()
