"""Replicas behind a real load balancer: Debian's nginx runs
deploy/nginx/eventlog.conf, the file deploy/compose.yaml uses, in front of two replica
processes on one PostgreSQL database of the test's own.

- Live SSE passes unbuffered: a reader that asks for compression, as a browser does,
  follows a stream through nginx while events are appended one at a time, alternately on
  the replica serving it and on the other; each must arrive within seconds, before the
  next is appended. (With `gzip on` for the live location it fails: the events are held.)
  The append→reader latencies, through nginx and from a reader of the same replica
  without it, side by side, are printed against the live goals (same process p99 ≤ 50 ms,
  across replicas ≤ 500 ms; docs/live-benchmarks.md): figures of a shared machine, not
  assertions.
- A reader whose replica dies is cut by nginx, reconnects through it (with its
  Last-Event-ID, as an EventSource does), lands on the other replica and continues
  exactly: every event once, in order.
- Long-polls (`?after=N&wait=S`) pass: answered at the append, or empty at the wait's end.
- Bad input gets the same answer through nginx as directly (status and problem `code`).
- The WebSocket append channel (`GET /v1/append`) passes nginx: an upgrade through the
  proxy, a frame appended and answered.

nginx runs from a temporary prefix on a free port of 127.0.0.1; the replicas are open
(no keys), which `serve` allows on loopback only.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from app.settings import Settings
from app.storage.migrate import upgrade
from tests.deploy.nginx import Nginx, require_nginx
from tests.support.databases import (
    drop_postgres_database,
    require_postgres_database,
)
from tests.support.live_readers import WAIT, LiveReader, SseEvent, live_request, metric
from tests.support.processes import ServerProcess
from tests.support.writer_calls import open_token as open_generation

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

MAX_BODY = Settings().max_body_bytes  # the default, which eventlog.conf's limit equals
REPLICA_ENV = {
    "EVENTLOG_MIGRATE_ON_START": "false",
    "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
    "EVENTLOG_LIVE_RETRY_MS": "200",  # a cut reader comes back quickly
    "EVENTLOG_LOG_LEVEL": "warning",
}
DELIVERY_BOUND = 5.0  # seconds: far above a wake-up, far below the 15 s heartbeat
ROUNDS = 40
GOALS_MS = {"same replica": 50.0, "across": 500.0}
READERS = "eventlog_live_readers"


@dataclass
class Stack:
    """The two replicas on one database, and nginx in front of them."""

    a: ServerProcess
    b: ServerProcess
    proxy: str
    nginx: Nginx

    @property
    def replicas(self) -> tuple[ServerProcess, ServerProcess]:
        return self.a, self.b

    def other(self, replica: ServerProcess) -> ServerProcess:
        return self.b if replica is self.a else self.a


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    executable = require_nginx()
    database_url = require_postgres_database()
    workdir = tmp_path_factory.mktemp("nginx")
    try:
        upgrade(database_url)  # the compose file's migrate job
        with ExitStack() as started:
            replicas = []
            for name in ("a", "b"):
                log = workdir / f"replica-{name}.log"
                replica = ServerProcess(database_url, log_path=log, env=REPLICA_ENV)
                started.callback(replica.stop)
                replica.start()
                replicas.append(replica)
            nginx = Nginx(executable, workdir / "prefix", [r.base_url for r in replicas])
            checked = nginx.check()
            assert checked.returncode == 0, checked.stderr
            proxy = started.enter_context(nginx.running())
            yield Stack(replicas[0], replicas[1], proxy, nginx)
    finally:
        drop_postgres_database(database_url)


async def append(base_url: str, token: str, seq: int) -> None:
    body = {"events": [{"data": f"event {seq}"}], "first_seq": seq}
    async with httpx.AsyncClient(base_url=base_url, timeout=WAIT) as http:
        answer = await http.post(f"/v1/generations/{token}/events", json=body)
    assert answer.status_code == 201, answer.text


async def browser_like_reader(
    base_url: str, stream_id: str, on_event: Callable[[SseEvent], None]
) -> LiveReader:
    """A live reader whose request asks for compression, as browsers' EventSource does: a
    proxy that compresses the stream would hold its events back (and this parser would not
    read them)."""
    url = urlsplit(base_url)
    assert url.hostname is not None
    assert url.port is not None
    stream, writer = await asyncio.open_connection(url.hostname, url.port)
    plain = live_request(url.netloc, stream_id, None)
    writer.write(plain.replace(b"\r\n\r\n", b"\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n", 1))
    return LiveReader(base_url, stream_id, on_event=on_event).adopt(stream, writer)


async def serving_replica(stack: Stack) -> ServerProcess:
    """The replica whose gauge counts the one live reader (nginx chose it)."""
    async with asyncio.timeout(WAIT):
        while True:
            counts = [await metric(r.base_url, READERS) for r in stack.replicas]
            if sorted(counts) == [0, 1]:
                return stack.replicas[counts.index(1)]
            await asyncio.sleep(0.05)  # another process's gauge: asked until it agrees


def percentiles(samples: list[float]) -> str:
    """p50, p99 and the largest of `samples` (seconds), in ms."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    p50, p99, top = cuts[49] * 1000, cuts[98] * 1000, max(samples) * 1000
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {top:.1f} ms"


def test_nginx_accepts_the_deployment_configuration(stack: Stack) -> None:
    checked = stack.nginx.check()
    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


async def test_live_events_pass_nginx_unbuffered(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.proxy, timeout=WAIT) as http:
        token = await open_generation(http, "nginx-latency")
    arrived: dict[str, dict[int, float]] = {"through nginx": {}, "direct": {}}

    async def follow(base_url: str, path: str) -> LiveReader:
        def heard(event: SseEvent) -> None:
            arrived[path].setdefault(event.seq, time.perf_counter())

        return await browser_like_reader(base_url, "nginx-latency", heard)

    proxied = await follow(stack.proxy, "through nginx")
    await proxied.wait_until(lambda r: bool(r.statuses))
    near = await serving_replica(stack)
    # Beside it, a reader of the same replica without nginx: the same deliveries, compared.
    direct = await follow(near.base_url, "direct")
    try:
        await direct.wait_until(lambda r: bool(r.statuses))
        assert (proxied.statuses, direct.statuses) == ([200], [200])
        samples: dict[tuple[str, str], list[float]] = {}
        for seq in range(1, ROUNDS + 1):
            writer, kind = (near, "same replica") if seq % 2 else (stack.other(near), "across")
            sent = time.perf_counter()
            await append(writer.base_url, token, seq)
            samples.setdefault(("the append itself", kind), []).append(time.perf_counter() - sent)
            for path, reader in (("through nginx", proxied), ("direct", direct)):
                heard = arrived[path]
                await reader.wait_until(lambda _r, h=heard, s=seq: s in h, within=DELIVERY_BOUND)
                samples.setdefault((path, kind), []).append(heard[seq] - sent)
    finally:
        await proxied.stop()
        await direct.stop()
    expected = [(token, seq, f"event {seq}") for seq in range(1, ROUNDS + 1)]
    for reader in (proxied, direct):
        assert [(e.token, e.seq, e.data) for e in reader.data()] == expected
    print(f"\nappend→reader, {ROUNDS} appends, one at a time (from the append's send):")
    for (path, kind), latencies in sorted(samples.items()):
        goal = f"(goal p99 ≤ {GOALS_MS[kind]:.0f} ms)" if path != "the append itself" else ""
        print(f"  {kind}, {path}: {percentiles(latencies)} {goal}")


async def test_a_reader_cut_by_nginx_resumes_on_the_other_replica_exactly(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.proxy, timeout=WAIT) as http:
        token = await open_generation(http, "nginx-failover")
    claims: list[str | None] = []
    reader = LiveReader(stack.proxy, "nginx-failover", reconnect=True, on_connect=claims.append)
    reader.start()
    doomed: ServerProcess | None = None
    try:
        await reader.wait_until(lambda r: bool(r.statuses))
        doomed = await serving_replica(stack)
        survivor = stack.other(doomed)
        for seq in range(1, 11):
            await append(survivor.base_url, token, seq)
        await reader.wait_until(lambda r: len(r.data()) == 10)
        doomed.kill()  # nginx ends the reader's response mid-stream
        for seq in range(11, 21):  # while the reader is away
            await append(survivor.base_url, token, seq)
        await reader.wait_until(lambda r: len(claims) >= 2)
        for seq in range(21, 31):  # once it is back
            await append(survivor.base_url, token, seq)
        await reader.wait_until(lambda r: len(r.data()) >= 30)
        assert await metric(survivor.base_url, READERS) == 1  # it came back to the survivor
    finally:
        await reader.stop()
        if doomed is not None:
            doomed.start()
    assert [e.id for e in reader.data()] == [f"{token}:{seq}" for seq in range(1, 31)]
    assert claims[:2] == [None, f"{token}:10"]  # the reconnect claimed its last event
    print(f"\nreader cut by nginx: {len(claims)} connections, 30/30 events once, in order")


async def test_long_polls_pass_nginx(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.proxy, timeout=WAIT) as http:
        token = await open_generation(http, "nginx-long-poll")
        page = f"/v1/generations/{token}/events"
        polling = asyncio.create_task(http.get(page, params={"after": 0, "wait": 20}))
        await asyncio.sleep(0.5)  # the poll is waiting at a replica by now (or soon)
        started = time.monotonic()
        await append(stack.a.base_url, token, 1)
        answered = await polling
        woke_after = time.monotonic() - started
        assert answered.status_code == 200, answered.text
        assert [e["id"] for e in answered.json()["events"]] == [f"{token}:1"]
        assert woke_after < 10  # at the append, not at the end of the 20 s wait
        quiet = await http.get(page, params={"after": 1, "wait": 2})
        assert quiet.status_code == 200, quiet.text
        assert quiet.json()["events"] == []


def _hostile(token: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(name, method, path, httpx keywords) of requests the service must refuse."""
    events = f"/v1/generations/{token}/events"
    json_body = {"content-type": "application/json"}
    return [
        ("a foreign Host", "GET", "/v1/streams/s", {"headers": {"host": "evil.example"}}),
        (
            "a foreign Origin",
            "POST",
            "/v1/streams/s/generations",
            {"headers": {"origin": "http://evil.example"}},
        ),
        (
            "an oversized body",
            "POST",
            events,
            {"content": b"x" * (2 * MAX_BODY), "headers": json_body},
        ),
        (
            "a malformed JSON body",
            "POST",
            events,
            {"content": b'{"events": [', "headers": json_body},
        ),
        ("an unknown route", "GET", "/v1/no-such-route", {}),
        ("a wrong method", "DELETE", "/v1/streams/s/resume", {}),
    ]


def test_bad_input_gets_the_same_answers_through_nginx(stack: Stack) -> None:
    # A blocking client, as curl is: on an oversized body the service answers 413 before
    # reading it and closes at once (no lingering close), and httpx's async client then
    # reports a reset instead of the answer, directly and through nginx alike.
    with httpx.Client(base_url=stack.proxy, timeout=WAIT) as http:
        opened = http.post("/v1/streams/nginx-hostile/generations")
        token = opened.json()["generation"]
    answers = {}
    for base in (stack.a.base_url, stack.proxy):
        with httpx.Client(base_url=base, timeout=WAIT) as http:
            for name, method, path, kwargs in _hostile(token):
                got = http.request(method, path, **kwargs)
                kind = got.headers["content-type"]
                assert kind == "application/problem+json", (name, base, got.text)
                answers[base, name] = (got.status_code, got.json()["code"])
    for name, *_ in _hostile(token):
        assert answers[stack.proxy, name] == answers[stack.a.base_url, name], name
    assert {name: answers[stack.proxy, name] for name, *_ in _hostile(token)} == {
        "a foreign Host": (421, "host_not_allowed"),
        "a foreign Origin": (403, "origin_not_allowed"),
        "an oversized body": (413, "body_too_large"),
        "a malformed JSON body": (422, "invalid_json"),
        "an unknown route": (404, "not_found"),
        "a wrong method": (405, "method_not_allowed"),
    }


def test_the_append_channel_passes_nginx(stack: Stack) -> None:
    from websockets.sync.client import connect

    with httpx.Client(base_url=stack.proxy, timeout=WAIT) as http:
        token = http.post("/v1/streams/nginx-channel/generations").json()["generation"]
    url = stack.proxy.replace("http://", "ws://") + "/v1/append"
    with connect(url, open_timeout=WAIT) as channel:
        frame = {"id": 1, "generation": token, "events": [{"data": "x"}], "first_seq": 1}
        channel.send(json.dumps(frame))
        answer = json.loads(channel.recv(timeout=WAIT))
    assert (answer["id"], answer["status"], answer["event_ids"]) == (1, 201, [f"{token}:1"])
