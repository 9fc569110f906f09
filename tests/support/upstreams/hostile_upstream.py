"""A hostile MCP upstream for the gateway: `python -m tests.support.upstreams.hostile_upstream
--port P`. It speaks just enough Streamable HTTP to open a session (initialize answered as
JSON with an `Mcp-Session-Id`, notifications accepted with 202); a `tools/call` then
misbehaves as its `mode` argument says:

- `malformed`: an SSE response of broken frames (bad JSON, a stray field, no blank line)
  and then the connection closed, never a response;
- `drip`: a valid SSE response sent one byte every `interval` seconds;
- `huge`: one progress notification of `size` bytes (10 MiB by default) in one event,
  then the result;
- anything else: a well-behaved progress, then the result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid


def _frame(message: dict[str, object]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def _progress(request: dict[str, object], step: int, message: str) -> bytes:
    params = request.get("params") or {}
    assert isinstance(params, dict)
    token = (params.get("_meta") or {}).get("progressToken", 0)
    note = {"progress": step, "total": 1, "message": message, "progressToken": token}
    return _frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})


def _result(request: dict[str, object], text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return _frame({"jsonrpc": "2.0", "id": request["id"], "result": result})


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ")[0]
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method != "POST":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            return
        request = json.loads(body)
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
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"connection: close\r\n\r\n"
        )
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


async def _main(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(_main(parser.parse_args().port))


if __name__ == "__main__":
    main()
