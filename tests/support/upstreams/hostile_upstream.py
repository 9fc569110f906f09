"""A hostile MCP upstream for the gateway: `python -m tests.support.upstreams.hostile_upstream
--port P`. It speaks just enough Streamable HTTP to open a session (initialize answered as
JSON with an `Mcp-Session-Id`, notifications accepted with 202); a `tools/call` then
misbehaves as its `mode` argument says:

- `malformed`: an SSE response of broken frames (bad JSON, a stray field, no blank line)
  and then the connection closed, never a response;
- `drip`: a valid SSE response sent one byte every `interval` seconds;
- `huge`: one progress notification of `size` bytes (10 MiB by default) in one event,
  then the result;
- `ids`: a stream with a `retry:` (`retry` ms, 100 by default) and event ids, one progress
  notification, then the connection closed before the result; a reconnect (`GET` with
  `Last-Event-ID`) is answered as `reconnect` says: `refuse` (the connection closed at
  once), `404`, `json` (a 200 that is not SSE), `priming` (a stream of one priming event
  with a new id, then closed: never a message) or `result` (the result);
  `GET /test/reconnects` answers how many reconnects came;
- `gzip-sse`: the SSE response `Content-Encoding: gzip`, each frame flushed as it is sent;
- `br-json`: a JSON response body encoded `br` (not an encoding the gateway decodes);
- `spoofed-ids`: answers carrying `"id": true` and the id as a string before the result;
- anything else: a well-behaved progress, then the result.

A batch (a JSON array of requests) is answered by one SSE stream: the responses in
order, a progress notification before each.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib

from tests.support.upstreams import raw_server

reconnects = {"count": 0}


def _frame(message: dict[str, object]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def _progress(request: dict[str, object], step: int, message: str) -> bytes:
    params = request.get("params") or {}
    assert isinstance(params, dict)
    token = (params.get("_meta") or {}).get("progressToken", 0)
    note = {"progress": step, "total": 1, "message": message, "progressToken": token}
    return _frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})


def _result(request: dict[str, object], text: str, request_id: object = None) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    answered = request["id"] if request_id is None else request_id
    return _frame({"jsonrpc": "2.0", "id": answered, "result": result})


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n"
)


async def _reconnected(writer: asyncio.StreamWriter, last_event_id: str) -> None:
    """A reconnect of an `ids` stream: its id says how to answer (`<reconnect>~<id>~<n>`)."""
    reconnects["count"] += 1
    how, request_id, count = last_event_id.split("~")
    if how == "refuse":
        writer.transport.abort()
        return
    if how == "404":
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        return
    if how == "json":
        body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}'
        head = f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(b"HTTP/1.1 200 OK\r\n" + head.encode() + body)
        return
    writer.write(SSE_HEAD + b"\r\n")
    next_id = f"{how}~{request_id}~{int(count) + 1}".encode()
    if how == "priming":
        writer.write(b"id: " + next_id + b"\ndata:\n\n")
        return
    request = {"id": json.loads(request_id)}
    writer.write(b"id: " + next_id + b"\n" + _result(request, "reconnected"))


async def _ids(writer: asyncio.StreamWriter, request: dict[str, object], arguments: dict) -> None:
    """One progress with an id, after a `retry:`; then the stream ends, unanswered."""
    stem = f"{arguments.get('reconnect', 'result')}~{json.dumps(request['id'])}"
    writer.write(f"retry: {int(arguments.get('retry', 100))}\n".encode())
    writer.write(f"id: {stem}~0\ndata:\n\n".encode())
    writer.write(f"id: {stem}~1\n".encode() + _progress(request, 1, "step 1"))


async def _gzipped(writer: asyncio.StreamWriter, frames: list[bytes]) -> None:
    writer.write(SSE_HEAD + b"content-encoding: gzip\r\n\r\n")
    compressor = zlib.compressobj(wbits=31)  # the gzip format
    for frame in frames:
        writer.write(compressor.compress(frame) + compressor.flush(zlib.Z_SYNC_FLUSH))
        await writer.drain()
        await asyncio.sleep(0.05)
    writer.write(compressor.flush())


async def _batch(writer: asyncio.StreamWriter, batch: list[dict[str, object]]) -> None:
    writer.write(SSE_HEAD + b"\r\n")
    for request in [r for r in batch if "id" in r]:
        writer.write(_progress(request, 1, f"before {request['id']}"))
        writer.write(_result(request, f"answer to {request['id']}"))
        await writer.drain()
        await asyncio.sleep(0.02)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ")[0]
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        target = lines[0].split(" ")[1]
        if method == "GET" and target == "/test/reconnects":
            counted = json.dumps(reconnects).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(counted)}\r\n\r\n".encode()
                + counted
            )
            return
        if method == "GET" and "last-event-id" in headers:
            await _reconnected(writer, headers["last-event-id"])
            return
        if method != "POST":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            return
        request = json.loads(body)
        if isinstance(request, list):
            await _batch(writer, request)
            return
        if "id" not in request:
            writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            return
        if request.get("method") == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
            payload = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"mcp-session-id: {uuid.uuid4().hex}\r\n".encode()
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload.encode()
            )
            return
        arguments = request.get("params", {}).get("arguments", {})
        mode = arguments.get("mode", "")
        if mode == "br-json":
            encoded = b"\x8b\x03\x80not decodable by the gateway\x03"
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-encoding: br\r\ncontent-length: {len(encoded)}\r\n\r\n".encode()
                + encoded
            )
            return
        if mode == "gzip-sse":
            await _gzipped(writer, [_progress(request, 1, "step 1"), _result(request, "gzip done")])
            return
        writer.write(SSE_HEAD + b"\r\n")
        if mode == "ids":
            await _ids(writer, request, arguments)
            return
        if mode == "spoofed-ids":
            writer.write(_result(request, "spoofed by true", request_id=True))
            writer.write(_result(request, "spoofed by a string", request_id=str(request["id"])))
            writer.write(_result(request, "the real answer"))
            return
        if mode == "malformed":
            writer.write(b"data: {not json at all\n\nevent: message\nid\x00: 1\ndata: [1, 2\n\n")
            writer.write(b"data: " + b"z" * 1000)
            await writer.drain()
            return
        if mode == "huge":
            writer.write(_progress(request, 1, "x" * int(arguments.get("size", 10 * 2**20))))
            writer.write(_result(request, "huge done"))
            return
        frames = _progress(request, 1, "step 1") + _result(request, "counted to 1")
        if mode == "drip":
            for index in range(len(frames)):
                writer.write(frames[index : index + 1])
                await writer.drain()
                await asyncio.sleep(float(arguments.get("interval", 0.01)))
            return
        writer.write(frames)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            await writer.drain()
            writer.close()
        except ConnectionError:
            pass


def main() -> None:
    """Serve on 127.0.0.1."""
    raw_server.main(_handle)


if __name__ == "__main__":
    main()
