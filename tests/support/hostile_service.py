"""A fake event-log service that misbehaves on purpose, as a real process.

`python -m tests.support.hostile_service --port P --other-port Q` listens on 127.0.0.1:P and
answers every request according to its bearer key (so one process serves every test, and
a client picks the misbehaviour with `key=`):

| key | the answer |
|---|---|
| `html` | 200 `text/html`, a captive portal's page |
| `not-json` | 200 `application/json` whose body is HTML |
| `missing-fields` | 200 `application/json`, `{"generation": "tok"}` for any route |
| `wrong-types` | 200 `application/json`, every field of every answer of the wrong type |
| `drip` | 200 `application/json`, `Content-Length: 4096`, one byte a second |
| `huge` | 200 `application/json`, 1 GiB of a JSON array |
| `gzip-bomb` | 200 `application/json`, `Content-Encoding: gzip`: 1 GiB of zeros inflated |
| `redirect` | 307 to the same path on 127.0.0.2:Q, "another host", which counts what reaches it |
| `sse-endless-line` | 200 `text/event-stream`, `data: ` and then 1 GiB without a line end |
| `sse-malformed-id` | 200 `text/event-stream`, an event whose id is not `<token>:<seq>` |
| `sse-malformed-control` | 200 `text/event-stream`, an `end` control event whose data is not JSON |

Everything it sends is bounded (1 GiB, 120 s), and it stops sending when the client
goes away. `GET /hostile/seen` (any key) answers how many requests reached "another host".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import zlib
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


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
    """Method, path and headers of one request (its body is read and dropped)."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    method, path, _ = line.split(" ", 2)
    headers = {}
    for field in fields:
        name, sep, value = field.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length:
        await reader.readexactly(length)
    return method, path, headers


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
    writer: asyncio.StreamWriter, head: dict[str, str], chunks: Callable[[int], bytes]
) -> None:
    """`chunks(i)` for i = 0, 1, … until 1 GiB was produced or the client left."""
    writer.write(status_line(200, head))
    sent = 0
    index = 0
    while sent < GiB:
        chunk = chunks(index)
        writer.write(chunk)
        await writer.drain()
        sent += len(chunk)
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


def answers(
    hostile: Hostile, path: str
) -> dict[str, Callable[[asyncio.StreamWriter], Awaitable[None]]]:
    """What each key is answered with."""
    elsewhere = f"http://127.0.0.2:{hostile.other_port}{path}"
    line = b"x" * CHUNK
    array = b"0," * (CHUNK // 2)
    return {
        "html": lambda w: whole(w, "text/html", b"<html><body>Sign in to the Wi-Fi</body></html>"),
        "not-json": lambda w: whole(w, "application/json", b"<html><body>oops</body></html>"),
        "missing-fields": lambda w: whole(w, "application/json", b'{"generation": "tok"}'),
        "wrong-types": lambda w: whole(w, "application/json", json.dumps(WRONG_TYPES).encode()),
        "drip": drip,
        "huge": lambda w: endless(
            w, {"Content-Type": "application/json"}, lambda i: (b"[" if i == 0 else b"") + array
        ),
        "gzip-bomb": lambda w: endless(
            w, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, gzip_bomb()
        ),
        "redirect": lambda w: redirect(w, elsewhere),
        "sse-endless-line": lambda w: endless(
            w,
            {"Content-Type": "text/event-stream"},
            lambda i: (b"data: " if i == 0 else b"") + line,
        ),
        "sse-malformed-id": lambda w: sse(w, b"id: not-an-id\ndata: x\n\n"),
        "sse-malformed-control": lambda w: sse(w, b"event: end\ndata: {not json\n\n"),
    }


async def redirect(writer: asyncio.StreamWriter, location: str) -> None:
    """307: the same method and body, somewhere else."""
    head = {"Location": location, "Content-Length": "0"}
    writer.write(status_line(307, head))
    await writer.drain()


async def serve_main(
    hostile: Hostile, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """The misbehaving service."""
    with contextlib.suppress(
        ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError
    ):
        try:
            _method, path, headers = await read_request(reader)
            if path == "/hostile/seen":
                body = json.dumps({"elsewhere": hostile.seen_elsewhere}).encode()
                await whole(writer, "application/json", body)
                return
            key = headers.get("authorization", "").removeprefix("Bearer ")
            answer = answers(hostile, path).get(key)
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
