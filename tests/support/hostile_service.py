"""A fake event-log service that misbehaves on purpose, as a real process.

`python -m tests.support.hostile_service --port P --other-port Q` listens on 127.0.0.1:P and
answers every request according to its bearer key (so one process serves every test, and
a client picks the misbehaviour with `key=`):

| key | the answer |
|---|---|
| `html` | 200 `text/html`, a captive portal's page |
| `not-json` | 200 `application/json` whose body is HTML |
| `not-utf8` | 200 `application/json` whose bytes are not UTF-8 |
| `missing-fields` | 200 `application/json`, `{"generation": "tok"}` for any route |
| `wrong-types` | 200 `application/json`, every field of every answer of the wrong type |
| `drip` | 200 `application/json`, `Content-Length: 4096`, one byte a second |
| `huge` | 200 `application/json`, 1 GiB of a JSON array |
| `gzip-bomb` | 200 `application/json`, `Content-Encoding: gzip`: 1 GiB of zeros inflated |
| `redirect` | 307 to the same path on 127.0.0.2:Q, "another host", which counts what reaches it |
| `redirect-302` | the same with 302 |
| `sse-endless-line` | 200 `text/event-stream`, `data: ` and then 1 GiB without a line end |
| `sse-malformed-id` | 200 `text/event-stream`, an event whose id is not `<token>:<seq>` |
| `sse-malformed-control` | 200 `text/event-stream`, an `end` control event whose data is not JSON |
| `sse-malformed-reset` | 200 `text/event-stream`, events of odd data, then a `reset` not JSON |
| `sse-silent` | 200 `text/event-stream`, `retry: 1000` and then nothing |

The append channel (`GET /v1/append`, a WebSocket) is misbehaved on by the keys `ws-…`:
the upgrade is accepted, and every frame the client sends is answered with

| key | the answer to each frame |
|---|---|
| `ws-garbage` | a text frame that is not JSON |
| `ws-binary` | a binary frame |
| `ws-wrong-id` | a well-formed acknowledgement of another frame id |
| `ws-missing-fields` | `{"id": <its id>, "status": 201}` and nothing else |
| `ws-silent` | nothing, ever (the channel stays open) |
| `ws-close` | a close frame (1011) and the end of the connection |
| `ws-huge` | a text frame announced as 1 GiB, sent until the client leaves |

With a `ws-…` key, `POST …/generations` answers a well-formed generation (so a store gets
as far as appending) and any other REST request 503 `database_unavailable`; an upgrade
with any other key gets that key's HTTP answer above (`html`, `redirect`, …), as a
refused upgrade. Two keys refuse the upgrade and answer REST as the service would (a
generation, each append acknowledged, each lease renewed), so a store falls back to REST
and stores there:

| key | the answer to the upgrade |
|---|---|
| `ws-redirect` | 307 to the same path on "another host" |
| `ws-refuse` | 404 `not_found`, as a service without the channel |

Everything it sends is bounded (1 GiB, 120 s), and it stops sending when the client
goes away. `GET /hostile/seen` (any key) answers how many requests reached "another host";
`GET /hostile/sent` the bytes of every endless body sent per key (`bytes`) and the frames
received per `ws-…` key (`frames`), so a test sees that a client stopped reading, or sent
a frame once.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import struct
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import ServerProcess, free_port

GiB = 1024**3
MiB = 1024**2
CHUNK = MiB
DRIP_SECONDS = 120


class Hostile:
    """The two listeners' shared state."""

    def __init__(self, other_port: int) -> None:
        self.other_port = other_port
        self.seen_elsewhere = 0
        self.sent_bytes: Counter[str] = Counter()
        self.frames: Counter[str] = Counter()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
    """Method, path and headers of one request (its body is read and dropped)."""
    method, path, headers, _ = await read_request_body(reader)
    return method, path, headers


async def read_request_body(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes]:
    """Method, path, headers and body of one request."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    method, path, _ = line.split(" ", 2)
    headers = {}
    for field in fields:
        name, sep, value = field.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


def status_line(status: int, headers: dict[str, str]) -> bytes:
    """The head of an answer that ends with the connection (no keep-alive)."""
    lines = [f"HTTP/1.1 {status} X", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def whole(writer: asyncio.StreamWriter, kind: str, body: bytes, status: int = 200) -> None:
    """One ordinary answer."""
    head = {"Content-Type": kind, "Content-Length": str(len(body))}
    writer.write(status_line(status, head) + body)
    await writer.drain()


async def endless(
    writer: asyncio.StreamWriter,
    head: dict[str, str],
    chunks: Callable[[int], bytes],
    sent: Callable[[int], None],
) -> None:
    """`chunks(i)` for i = 0, 1, … until 1 GiB was produced or the client left; `sent` is
    told the bytes of each chunk written."""
    writer.write(status_line(200, head))
    produced = 0
    index = 0
    while produced < GiB:
        chunk = chunks(index)
        writer.write(chunk)
        await writer.drain()
        sent(len(chunk))
        produced += len(chunk)
        index += 1


async def drip(writer: asyncio.StreamWriter) -> None:
    """A JSON answer that arrives one byte a second."""
    writer.write(status_line(200, {"Content-Type": "application/json", "Content-Length": "4096"}))
    for _ in range(DRIP_SECONDS):
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(1)


def gzip_bomb() -> Callable[[int], bytes]:
    """Compressed zeros, a MiB of them (inflated) per call, about 1 KiB each on the wire."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(CHUNK)

    def chunk(index: int) -> bytes:
        return compressor.compress(zeros) + compressor.flush(zlib.Z_SYNC_FLUSH)

    return chunk


_FIELDS = """stream_id generation epoch reason producer head_seq tail_seq terminal terminal_seq
created_at supersedes event_ids duplicate verdict detail last_event_id discard_client_state
events next_after updated_at generations current"""
WRONG_TYPES = {name: [1] if name != "events" else 7 for name in _FIELDS.split()}


async def sse(writer: asyncio.StreamWriter, frames: bytes) -> None:
    """A live answer: these frames, then the connection held open a while."""
    writer.write(status_line(200, {"Content-Type": "text/event-stream"}) + frames)
    await writer.drain()
    await asyncio.sleep(DRIP_SECONDS)


# Events whose data is no MCP message (a client passes them on as they are), then a `reset`
# whose data is not JSON (a client stops there).
MALFORMED_RESET = (
    b"event: mcp-server-event\nid: t:1\ndata: {not json\n\n"
    b'event: mcp-server-event\nid: t:2\ndata: {"method": 7}\n\n'
    b'event: mcp-server-event\nid: t:3\ndata: {"method": "notifications/unknown"}\n\n'
    b"event: reset\ndata: [1, 2\n\n"
)


def answers(
    hostile: Hostile, key: str, path: str
) -> dict[str, Callable[[asyncio.StreamWriter], Awaitable[None]]]:
    """What each key is answered with."""
    elsewhere = f"http://127.0.0.2:{hostile.other_port}{path}"
    line = b"x" * CHUNK
    array = b"0," * (CHUNK // 2)

    def sent(size: int) -> None:
        hostile.sent_bytes[key] += size

    return {
        "html": lambda w: whole(w, "text/html", b"<html><body>Sign in to the Wi-Fi</body></html>"),
        "not-json": lambda w: whole(w, "application/json", b"<html><body>oops</body></html>"),
        "not-utf8": lambda w: whole(w, "application/json", b'{"\xe9"}'),
        "missing-fields": lambda w: whole(w, "application/json", b'{"generation": "tok"}'),
        "wrong-types": lambda w: whole(w, "application/json", json.dumps(WRONG_TYPES).encode()),
        "drip": drip,
        "huge": lambda w: endless(
            w,
            {"Content-Type": "application/json"},
            lambda i: (b"[" if i == 0 else b"") + array,
            sent,
        ),
        "gzip-bomb": lambda w: endless(
            w, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, gzip_bomb(), sent
        ),
        "redirect": lambda w: redirect(w, elsewhere),
        "redirect-302": lambda w: redirect(w, elsewhere, 302),
        "sse-endless-line": lambda w: endless(
            w,
            {"Content-Type": "text/event-stream"},
            lambda i: (b"data: " if i == 0 else b"") + line,
            sent,
        ),
        "sse-malformed-id": lambda w: sse(w, b"id: not-an-id\ndata: x\n\n"),
        "sse-malformed-control": lambda w: sse(w, b"event: end\ndata: {not json\n\n"),
        "sse-malformed-reset": lambda w: sse(w, MALFORMED_RESET),
        "sse-silent": lambda w: sse(w, b"retry: 1000\n"),
    }


async def redirect(writer: asyncio.StreamWriter, location: str, status: int = 307) -> None:
    """307 (the same method and body) or 302, somewhere else."""
    head = {"Location": location, "Content-Length": "0"}
    writer.write(status_line(status, head))
    await writer.drain()


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_tokens = itertools.count(1)


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked server frame."""
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return head + payload


async def ws_read(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One client frame: its opcode and unmasked payload."""
    first, second = await reader.readexactly(2)
    size = second & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(size)
    return first & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def ws_answer(key: str, payload: bytes) -> bytes | None:
    """What `key` answers a frame with (None: nothing)."""
    try:
        frame_id = json.loads(payload).get("id")
    except ValueError:
        frame_id = None
    if key == "ws-garbage":
        return ws_frame(0x1, b"<html><body>not an answer</body></html>")
    if key == "ws-binary":
        return ws_frame(0x2, b"\x00\x01\x02")
    if key == "ws-wrong-id":
        ack = {
            "id": (frame_id or 0) + 1000,
            "status": 201,
            "generation": "tok",
            "event_ids": ["tok:1"],
            "head_seq": 1,
            "tail_seq": 1,
            "terminal": False,
            "duplicate": False,
        }
        return ws_frame(0x1, json.dumps(ack).encode())
    if key == "ws-missing-fields":
        return ws_frame(0x1, json.dumps({"id": frame_id, "status": 201}).encode())
    return None


async def serve_channel(
    hostile: Hostile,
    key: str,
    headers: dict[str, str],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Accept the upgrade, then misbehave on every frame as `key` says."""
    digest = hashlib.sha1((headers["sec-websocket-key"] + WS_GUID).encode()).digest()
    accept = base64.b64encode(digest).decode()
    writer.write(
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    async with asyncio.timeout(DRIP_SECONDS):
        while True:
            opcode, payload = await ws_read(reader)
            if opcode == 0x8:
                return
            hostile.frames[key] += 1
            if key == "ws-close":
                writer.write(ws_frame(0x8, struct.pack("!H", 1011) + b"hostile"))
                await writer.drain()
                return
            if key == "ws-huge":
                writer.write(struct.pack("!BBQ", 0x81, 127, GiB))
                for _ in range(GiB // CHUNK):
                    writer.write(bytes(CHUNK))
                    await writer.drain()
                return
            answer = ws_answer(key, payload)
            if answer is not None:
                writer.write(answer)
                await writer.drain()


async def ws_key_rest(writer: asyncio.StreamWriter, method: str, path: str) -> None:
    """REST for a `ws-…` key: a generation when one is opened, else 503."""
    if method == "POST" and path.endswith("/generations"):
        stream = path.split("/")[3]
        generation = {
            "stream_id": stream,
            "generation": f"hostile{next(_tokens)}",
            "epoch": 1,
            "reason": "initial",
            "producer": None,
            "head_seq": 1,
            "tail_seq": 0,
            "terminal": False,
            "terminal_seq": None,
            "created_at": "2026-01-01T00:00:00Z",
            "supersedes": None,
        }
        await whole(writer, "application/json", json.dumps(generation).encode(), 201)
        return
    problem = {"code": "database_unavailable", "detail": "hostile", "status": 503}
    await whole(writer, "application/problem+json", json.dumps(problem).encode(), 503)


def acknowledgement(path: str, body: bytes) -> dict[str, object]:
    """The service's answer to an append (`…/events`) or a lease renewal (`…/lease`)."""
    generation = path.split("/")[3]
    if path.endswith("/lease"):
        return {"generation": generation, "lease_expires_at": "2026-01-01T00:00:30Z"}
    batch = json.loads(body or b"{}")
    first = batch.get("first_seq") or 1
    count = len(batch.get("events", []))
    return {
        "generation": generation,
        "event_ids": [f"{generation}:{seq}" for seq in range(first, first + count)],
        "head_seq": 1,
        "tail_seq": first + count - 1,
        "terminal": False,
        "duplicate": False,
    }


async def refused_channel(
    hostile: Hostile,
    key: str,
    request: tuple[str, str, dict[str, str], bytes],
    writer: asyncio.StreamWriter,
) -> None:
    """`ws-redirect`, `ws-refuse`: the upgrade refused, REST answered as the service would."""
    method, path, headers, body = request
    if headers.get("upgrade", "").lower() == "websocket":
        if key == "ws-redirect":
            await redirect(writer, f"http://127.0.0.2:{hostile.other_port}{path}")
            return
        problem = {"code": "not_found", "detail": "no such route", "status": 404}
        await whole(writer, "application/problem+json", json.dumps(problem).encode(), 404)
        return
    if method == "POST" and path.startswith("/v1/generations/"):
        answer = json.dumps(acknowledgement(path, body)).encode()
        await whole(writer, "application/json", answer, 201 if path.endswith("/events") else 200)
        return
    await ws_key_rest(writer, method, path)


async def serve_main(
    hostile: Hostile, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """The misbehaving service."""
    with contextlib.suppress(
        ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError
    ):
        try:
            request = await read_request_body(reader)
            method, path, headers, _ = request
            key = headers.get("authorization", "").removeprefix("Bearer ")
            if key in ("ws-redirect", "ws-refuse"):
                await refused_channel(hostile, key, request, writer)
                return
            if key.startswith("ws-"):
                if headers.get("upgrade", "").lower() == "websocket":
                    await serve_channel(hostile, key, headers, reader, writer)
                else:
                    await ws_key_rest(writer, method, path)
                return
            if path == "/hostile/seen":
                body = json.dumps({"elsewhere": hostile.seen_elsewhere}).encode()
                await whole(writer, "application/json", body)
                return
            if path == "/hostile/sent":
                sent = {"bytes": hostile.sent_bytes, "frames": hostile.frames}
                await whole(writer, "application/json", json.dumps(sent).encode())
                return
            answer = answers(hostile, key, path).get(key)
            if answer is None:
                await whole(writer, "text/plain", f"no such misbehaviour {key!r}".encode(), 400)
                return
            await answer(writer)
        finally:
            writer.close()


async def serve_elsewhere(
    hostile: Hostile, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Another host: it counts what reaches it and acknowledges anything."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        try:
            await read_request(reader)
            hostile.seen_elsewhere += 1
            ack = {"generation": "stolen", "event_ids": ["stolen:1"], "head_seq": 1}
            await whole(writer, "application/json", json.dumps(ack).encode())
        finally:
            writer.close()


async def main() -> None:
    """Serve both listeners until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--other-port", type=int, required=True)
    args = parser.parse_args()
    hostile = Hostile(args.other_port)
    service = await asyncio.start_server(
        lambda r, w: serve_main(hostile, r, w), "127.0.0.1", args.port
    )
    other = await asyncio.start_server(
        lambda r, w: serve_elsewhere(hostile, r, w), "127.0.0.2", args.other_port
    )
    async with service, other:
        await asyncio.gather(service.serve_forever(), other.serve_forever())


@contextmanager
def hostile_service(workdir: Path) -> Iterator[str]:
    """This fake service as a process; yields its base URL."""
    port, other = free_port(), free_port()
    argv = ["-m", "tests.support.hostile_service", "--port", str(port), "--other-port", str(other)]
    log = workdir / f"hostile-{port}.log"
    with ServerProcess.program(argv, port=port, log_path=log) as server:
        yield server.base_url


if __name__ == "__main__":
    asyncio.run(main())
