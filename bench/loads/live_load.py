"""The live-read load processes: `python -m bench.loads.live_load < spec.json`.

They run apart from the servers under test, over 127.0.0.1, on uvloop. Kinds:

- `latency`: one writer appends at a fixed rate (open loop, a few kept connections so a
  slow append does not hold the schedule back) to one generation, through port `write`;
  one live reader follows the stream through port `read` (the same process, or another
  replica). Each event carries its number; the latency of event n is from the moment its
  append was sent to the moment the reader parsed it (one clock: this process's).
- `open`: opens a generation on each of `streams`; their tokens.
- `writers`: `concurrency` clients append one event per request as fast as they are
  answered, in timed `windows` (each with its port and the generations it cycles over);
  per window, appends/s and latency; per generation, the appends acknowledged.
- `readers`: opens `count` live readers (round-robin over `streams`), says `ready` on
  stdout, then reads `{"expect": {stream: events}}` from stdin and waits (bounded) until
  every reader has counted that many events; prints what each got. Readers count `id:`
  lines on the raw bytes (cheap: a thousand of them must not starve the server's core).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import uvloop

from bench.loads.http_client import Connection, WireError
from bench.loads.load import percentile
from bench.loads.payload import PROGRESS

HOST = "127.0.0.1"
_ID_LINE = b"\nid: "


def summary_ms(seconds: list[float]) -> dict[str, float]:
    """p50 / p99 / max in milliseconds."""
    return {
        "p50_ms": percentile(seconds, 0.50) * 1e3,
        "p99_ms": percentile(seconds, 0.99) * 1e3,
        "max_ms": max(seconds, default=0.0) * 1e3,
    }


def live_request(port: int, stream_id: str) -> bytes:
    """A live read of the stream from its current generation's seq 1."""
    return (
        f"GET /v1/streams/{stream_id}/live HTTP/1.1\r\nhost: {HOST}:{port}\r\n"
        "accept: text/event-stream\r\n\r\n"
    ).encode()


class CountingReader(asyncio.Protocol):
    """A live reader that only counts the events it is sent (their `id:` lines)."""

    def __init__(self) -> None:
        self.events = 0
        self.status: int | None = None
        self.headed = asyncio.get_running_loop().create_future()
        self.progress = asyncio.Event()
        self.closed = False
        self._tail = b""
        self._head = b""

    def data_received(self, data: bytes) -> None:
        if self.status is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self._head.split(b" ", 2)[1])
            self.headed.set_result(self.status)
            data, self._head = self._head[end + 2 :], b""
        # An `id:` line always follows a newline (the `retry:` line or a blank line), and
        # chunk-size lines and `data:` lines cannot contain one: counting on the raw bytes
        # is exact. The tail carries a pattern cut in two by a read.
        text = self._tail + data
        self.events += text.count(_ID_LINE)
        self._tail = text[-(len(_ID_LINE) - 1) :]
        self.progress.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.headed.done():
            self.headed.set_exception(ConnectionError("closed before an answer"))
        self.progress.set()


async def open_reader(port: int, stream_id: str) -> tuple[asyncio.Transport, CountingReader]:
    """A connected counting reader whose answer was 200."""
    loop = asyncio.get_running_loop()
    transport, reader = await loop.create_connection(CountingReader, HOST, port)
    transport.write(live_request(port, stream_id))
    status = await reader.headed
    if status != 200:
        raise RuntimeError(f"live read of {stream_id}: {status}")
    return transport, reader


# -- latency ---------------------------------------------------------------------------


@dataclass
class ParsingReader(asyncio.Protocol):
    """A live reader that parses the chunked SSE body and times each event's number."""

    received: dict[int, float] = field(default_factory=dict)
    headed: asyncio.Future[int] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    _buffer: bytearray = field(default_factory=bytearray)
    _body: bytearray = field(default_factory=bytearray)
    _chunk_left: int = -1  # bytes left of the current chunk (-1: a size line is next)
    progress: asyncio.Event = field(default_factory=asyncio.Event)

    _NUMBER = re.compile(rb'"n":(-?\d+)')

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self._buffer += data
        if not self.headed.done():
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self.headed.set_result(int(self._buffer.split(b" ", 2)[1]))
            del self._buffer[: end + 4]
        self._dechunk()
        while (end := self._body.find(b"\n\n")) >= 0:
            block = bytes(self._body[:end])
            del self._body[: end + 2]
            found = self._NUMBER.search(block)
            if found is not None:
                self.received.setdefault(int(found.group(1)), now)
        self.progress.set()

    def _dechunk(self) -> None:
        while True:
            if self._chunk_left < 0:
                line_end = self._buffer.find(b"\r\n")
                if line_end < 0:
                    return
                self._chunk_left = int(bytes(self._buffer[:line_end]).split(b";")[0], 16)
                del self._buffer[: line_end + 2]
            if len(self._buffer) < self._chunk_left + 2:
                return
            self._body += self._buffer[: self._chunk_left]
            del self._buffer[: self._chunk_left + 2]
            self._chunk_left = -1


def numbered(n: int) -> bytes:
    """An append of one progress notification (~200 bytes) that carries its number."""
    data = PROGRESS.replace('"progress":42', f'"n":{n},"progress":42', 1)
    return json.dumps({"events": [{"data": data}]}, separators=(",", ":")).encode()


async def run_latency(spec: dict[str, Any]) -> dict[str, Any]:
    """Appends at `rate`/s for `duration` s through `write`; one reader on `read`."""
    write, read, stream = spec["write"], spec["read"], spec["stream_id"]
    loop = asyncio.get_running_loop()
    opener = Connection(HOST, write)
    status, doc = await opener.json("POST", f"/v1/streams/{stream}/generations")
    if status != 201:
        raise RuntimeError(f"open: {status} {doc}")
    path = f"/v1/generations/{doc['generation']}/events"
    transport, reader = await loop.create_connection(ParsingReader, HOST, read)
    transport.write(live_request(read, stream))
    if await reader.headed != 200:
        raise RuntimeError("the live read was refused")
    conns = [Connection(HOST, write) for _ in range(spec.get("connections", 4))]
    for conn in conns:  # warm each connection up (outside the numbers)
        await conn.request("POST", path, numbered(-1))
    total = int(spec["rate"] * spec["duration"])
    sent: dict[int, float] = {}
    appended: list[float] = []
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in conns:
        free.put_nowait(conn)

    async def append(n: int, conn: Connection) -> None:
        began = sent[n] = time.perf_counter()
        answer, _ = await conn.request("POST", path, numbered(n))
        appended.append(time.perf_counter() - began)
        free.put_nowait(conn)
        if answer not in (200, 201):
            raise RuntimeError(f"append {n}: {answer}")

    start = time.perf_counter() + 0.2
    tasks = []
    for n in range(total):
        await asyncio.sleep(max(0.0, start + n / spec["rate"] - time.perf_counter()))
        tasks.append(asyncio.create_task(append(n, await free.get())))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    with contextlib.suppress(TimeoutError):  # what has not come in 30 s counts as lost
        async with asyncio.timeout(30):
            while len(reader.received) < total + 1:  # and the warm-up events, numbered -1
                reader.progress.clear()
                await reader.progress.wait()
    transport.close()
    for conn in [*conns, opener]:
        await conn.close()
    lags = [reader.received[n] - sent[n] for n in range(total) if n in reader.received]
    return {
        "appends": total,
        "appends_per_s": total / elapsed,
        "received": len(lags),
        "latency": summary_ms(lags),
        "append": summary_ms(appended),
    }


# -- writers and readers --------------------------------------------------------------


async def run_open(spec: dict[str, Any]) -> dict[str, Any]:
    """Open a generation on each of `streams` (eight at a time); their tokens, in order."""
    conns = [Connection(HOST, spec["port"]) for _ in range(8)]
    streams: list[str] = spec["streams"]
    tokens: list[str] = [""] * len(streams)

    async def opener(k: int) -> None:
        for i in range(k, len(streams), len(conns)):
            status, doc = await conns[k].json("POST", f"/v1/streams/{streams[i]}/generations")
            if status != 201:
                raise RuntimeError(f"open {streams[i]}: {status} {doc}")
            tokens[i] = doc["generation"]

    await asyncio.gather(*(opener(k) for k in range(len(conns))))
    for conn in conns:
        await conn.close()
    return {"tokens": tokens}


async def run_writers(spec: dict[str, Any]) -> dict[str, Any]:
    """Closed-loop appends, window after window, each to its `port` over its `tokens`."""
    body = json.dumps({"events": [{"data": PROGRESS}]}, separators=(",", ":")).encode()
    acked: dict[str, int] = {}
    windows = []
    conns: dict[int, list[Connection]] = {}
    for window in spec["windows"]:
        port = window["port"]
        if port not in conns:
            conns[port] = [Connection(HOST, port) for _ in range(spec["concurrency"])]
        result = await _window(conns[port], window["tokens"], body, window["duration"], acked)
        windows.append(result)
    for kept in conns.values():
        for conn in kept:
            await conn.close()
    return {"windows": windows, "acked": acked}


async def _window(
    conns: list[Connection], targets: list[str], body: bytes, duration: float, acked: dict[str, int]
) -> dict[str, Any]:
    end = time.perf_counter() + duration
    latencies: list[float] = []
    errors = 0
    turn = 0

    async def client(conn: Connection) -> None:
        nonlocal errors, turn
        while (began := time.perf_counter()) < end:
            token = targets[turn % len(targets)]
            turn += 1
            path = f"/v1/generations/{token}/events"
            try:
                status, _ = await conn.request("POST", path, body)
            except WireError:  # a kept connection closed while idle (uvicorn's keep-alive
                status, _ = await conn.request("POST", path, body)  # timeout): unread, resent
            if status in (200, 201):
                acked[token] = acked.get(token, 0) + 1
                latencies.append(time.perf_counter() - began)
            else:
                errors += 1

    began = time.perf_counter()
    await asyncio.gather(*(client(conn) for conn in conns))
    elapsed = time.perf_counter() - began
    return {"appends_per_s": len(latencies) / elapsed, "errors": errors, **summary_ms(latencies)}


async def run_readers(spec: dict[str, Any]) -> dict[str, Any]:
    """`count` counting readers over `streams`; `ready`, then wait for the expected counts."""
    port, streams = spec["port"], spec["streams"]
    opened: list[tuple[str, asyncio.Transport, CountingReader]] = []
    began = time.perf_counter()
    for start in range(0, spec["count"], 100):  # a hundred at a time: the backlog is finite
        wave = [streams[i % len(streams)] for i in range(start, min(start + 100, spec["count"]))]
        for stream, (transport, reader) in zip(
            wave, await asyncio.gather(*(open_reader(port, s) for s in wave)), strict=True
        ):
            opened.append((stream, transport, reader))
    connect_s = time.perf_counter() - began
    print("ready", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    expect: dict[str, int] = json.loads(line)["expect"]
    began = time.perf_counter()
    deadline = began + spec.get("drain_timeout", 60)
    while time.perf_counter() < deadline:
        if all(r.events >= expect.get(s, 0) for s, _, r in opened):
            break
        await asyncio.sleep(0.05)
    drain_s = time.perf_counter() - began
    complete = sum(r.events == expect.get(s, 0) for s, _, r in opened)
    closed = sum(r.closed for _, _, r in opened)
    for _, transport, _ in opened:
        transport.close()
    return {
        "readers": len(opened),
        "connect_s": connect_s,
        "drain_s": drain_s,
        "complete": complete,
        "closed_early": closed,
        "events": sum(r.events for _, _, r in opened),
    }


_KINDS = {
    "latency": run_latency,
    "open": run_open,
    "writers": run_writers,
    "readers": run_readers,
}


def main() -> int:
    """Read the spec (the first line of stdin), run it, print the result as JSON."""
    spec = json.loads(sys.stdin.readline())
    result = uvloop.run(_KINDS[spec["kind"]](spec))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
