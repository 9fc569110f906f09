"""Hostile input: every nasty request is a clear 4xx problem+json with a stable `code`,
and none of it is stored.

The table runs in-process on both databases; each case is checked against a fingerprint
of the database (row counts and every generation's counters) taken before it. Slow and
truncated bodies need a real socket, so they run against a real server process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.decision import decide
from app.domain.ids import parse_event_id
from app.domain.outcomes import Decided
from app.settings import Settings
from app.storage import decisions
from app.storage.database import Database
from app.storage.decisions import DecisionFilter
from app.storage.records import DecisionEntry
from app.storage.schema import events, generations, streams
from tests.support.app import app_client, make_settings, started_app, state_of
from tests.support.processes import ServerProcess
from tests.support.waiting import until

MAX_BODY = 1_048_576
MAX_EVENT = 1024


@dataclass(frozen=True)
class Case:
    """One hostile request and the problem it must get."""

    name: str
    method: str
    path: str  # may name {token}, the seeded generation
    status: int
    code: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def body(value: Any) -> dict[str, Any]:
    """A JSON body, sent with the JSON content type."""
    return {"content": json.dumps(value), "headers": {"content-type": "application/json"}}


def raw(content: bytes, content_type: str = "application/json") -> dict[str, Any]:
    """Bytes sent as they are, with a declared content type."""
    return {"content": content, "headers": {"content-type": content_type}}


APPEND = "/v1/generations/{token}/events"
OPEN = "/v1/streams/hostile/generations"
RESUME = "/v1/streams/hostile/resume"
NESTED = ("[" * 100_000 + "]" * 100_000).encode()

CASES = [
    Case(
        "NUL in event type",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x", "event": "a\x00b"}]}),
    ),
    Case(
        "CR in event type",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x", "event": "a\rb"}]}),
    ),
    Case(
        "LF in event type",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x", "event": "message\ndata: forged"}]}),
    ),
    Case(
        "NUL in data",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "a\x00b"}]}),
    ),
    Case(
        "lone surrogate in data",
        "POST",
        APPEND,
        422,
        "validation_error",
        raw(b'{"events": [{"data": "\\ud800"}]}'),
    ),
    Case("LF in producer", "POST", OPEN, 422, "validation_error", body({"producer": "p\nq"})),
    Case(
        "first_seq 2^63",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": 2**63}),
    ),
    Case(
        "first_seq 10^40",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": 10**40}),
    ),
    Case(
        "first_seq 2^63-1 (a gap)",
        "POST",
        APPEND,
        409,
        "seq_gap",
        body({"events": [{"data": "x"}], "first_seq": 2**63 - 1}),
    ),
    Case(
        "negative first_seq",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": -1}),
    ),
    Case(
        "zero first_seq",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": 0}),
    ),
    Case(
        "float first_seq",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": 3.0}),
    ),
    Case(
        "string first_seq",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "first_seq": "3"}),
    ),
    Case(
        "NaN first_seq",
        "POST",
        APPEND,
        422,
        "validation_error",
        raw(b'{"events": [{"data": "x"}], "first_seq": NaN}'),
    ),
    Case(
        "10,000-event batch",
        "POST",
        APPEND,
        413,
        "batch_too_large",
        body({"events": [{"data": str(i)} for i in range(10_000)]}),
    ),
    Case(
        "event over the size limit",
        "POST",
        APPEND,
        413,
        "event_too_large",
        body({"events": [{"data": "ok"}, {"data": "é" * (MAX_EVENT // 2) + "x"}]}),
    ),
    Case(
        "body over the size limit",
        "POST",
        APPEND,
        413,
        "body_too_large",
        body({"events": [{"data": "x" * (MAX_BODY + 1)}]}),
    ),
    Case(
        "deeply nested events",
        "POST",
        APPEND,
        422,
        "validation_error",
        raw(b'{"events": ' + b"[" * 500 + b"]" * 500 + b"}"),
    ),
    Case("deeply nested body", "POST", APPEND, 422, "invalid_json", raw(NESTED)),
    Case(
        "non-UTF-8 body",
        "POST",
        APPEND,
        422,
        "invalid_json",
        raw(b'{"events": [{"data": "\xff\xc0"}]}'),
    ),
    Case("truncated JSON", "POST", APPEND, 422, "invalid_json", raw(b'{"events": [{"data": "x"')),
    Case("JSON array body", "POST", APPEND, 422, "validation_error", body([{"data": "x"}])),
    Case(
        "unknown field",
        "POST",
        APPEND,
        422,
        "validation_error",
        body({"events": [{"data": "x"}], "tenant": "other"}),
    ),
    Case("events not a list", "POST", APPEND, 422, "validation_error", body({"events": "x"})),
    Case(
        "empty batch, not terminal", "POST", APPEND, 422, "validation_error", body({"events": []})
    ),
    Case(
        "text/plain body",
        "POST",
        APPEND,
        415,
        "unsupported_media_type",
        raw(b'{"events": [{"data": "x"}]}', "text/plain"),
    ),
    Case(
        "form body",
        "POST",
        APPEND,
        415,
        "unsupported_media_type",
        raw(b"events=x", "application/x-www-form-urlencoded"),
    ),
    Case(
        "multipart body",
        "POST",
        OPEN,
        415,
        "unsupported_media_type",
        raw(b"--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b"),
    ),
    Case(
        "untyped body",
        "POST",
        APPEND,
        415,
        "unsupported_media_type",
        {"content": b'{"events": [{"data": "x"}]}', "headers": {"content-type": ""}},
    ),
    Case(
        "stream id of 257 chars",
        "POST",
        "/v1/streams/" + "s" * 257 + "/generations",
        422,
        "validation_error",
    ),
    Case(
        "stream id of 10,000 chars",
        "POST",
        "/v1/streams/" + "s" * 10_000 + "/generations",
        422,
        "validation_error",
    ),
    Case(
        "SQL in the stream id",
        "POST",
        "/v1/streams/x';DROP TABLE events;--/generations",
        422,
        "validation_error",
    ),
    Case("NUL in the stream id", "POST", "/v1/streams/a%00b/generations", 422, "validation_error"),
    Case("LF in the stream id", "POST", "/v1/streams/a%0Ab/generations", 422, "validation_error"),
    Case("slash in the stream id", "POST", "/v1/streams/a%2Fb/generations", 404, "not_found"),
    Case(
        "SQL in the token",
        "POST",
        "/v1/generations/x'%20OR%20'1'='1/events",
        404,
        "unknown_generation",
        body({"events": [{"data": "x"}]}),
    ),
    Case(
        "token of 65 chars",
        "POST",
        "/v1/generations/" + "t" * 65 + "/events",
        422,
        "validation_error",
        body({"events": [{"data": "x"}]}),
    ),
    Case(
        "unknown token",
        "POST",
        "/v1/generations/AAAAAAAAAAAAAAAAAAAAAA/events",
        404,
        "unknown_generation",
        body({"events": [{"data": "x"}]}),
    ),
    Case("negative page after", "GET", APPEND + "?after=-1", 422, "validation_error"),
    Case("float page after", "GET", APPEND + "?after=1.5", 422, "validation_error"),
    Case("huge page after", "GET", APPEND + "?after=" + "9" * 40, 422, "validation_error"),
    Case("page beyond the tail", "GET", APPEND + "?after=99", 409, "beyond_tail"),
    Case("zero page limit", "GET", APPEND + "?limit=0", 422, "validation_error"),
    Case("huge page limit", "GET", APPEND + "?limit=" + "9" * 30, 422, "validation_error"),
    Case(
        "resume limit over the maximum",
        "POST",
        RESUME,
        422,
        "validation_error",
        body({"last_event_id": "t:1", "limit": 10**9}),
    ),
    Case(
        "resume id not a string",
        "POST",
        RESUME,
        422,
        "validation_error",
        body({"last_event_id": 47}),
    ),
    Case("resume without a body", "POST", RESUME, 422, "validation_error"),
    Case("max_events negative", "POST", OPEN, 422, "validation_error", body({"max_events": -5})),
    Case(
        "max_events over the limit",
        "POST",
        OPEN,
        422,
        "validation_error",
        body({"max_events": 10**12}),
    ),
    Case("unknown reason", "POST", OPEN, 422, "validation_error", body({"reason": "drop table"})),
    Case("wrong method", "PUT", APPEND, 405, "method_not_allowed", body({"events": []})),
    Case("unknown path", "GET", "/v1/nothing-here", 404, "not_found"),
]

# Resume ids are answered with a verdict (200), never stored: hostile ids are `invalid`.
HOSTILE_IDS = {
    "{token}:1\x00": "malformed_id",
    "{token}:1\r\n": "malformed_id",
    "{token}\n:1": "malformed_id",
    "{token}:-1": "malformed_id",
    "{token}:1.0": "malformed_id",
    "{token}:1e3": "malformed_id",
    "{token}:" + "9" * 40: "beyond_tail",
    "{token}:" + "1" * 400: "malformed_id",
    "'; DROP TABLE events; --:1": "malformed_id",
    "{token}' OR '1'='1:1": "malformed_id",
    "%00:1": "malformed_id",
    "": "malformed_id",
    "{token}:\u0661": "malformed_id",
}


async def fingerprint(database_url: str) -> tuple[Any, ...]:
    """Row counts and every generation's counters: equal before and after means nothing stored."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            counts = [
                (await conn.execute(select(func.count()).select_from(t))).scalar_one()
                for t in (streams, generations, events)
            ]
            gens = (
                await conn.execute(
                    select(
                        generations.c.token,
                        generations.c.head_seq,
                        generations.c.tail_seq,
                        generations.c.terminal,
                        generations.c.superseded_at,
                    ).order_by(generations.c.token)
                )
            ).all()
    finally:
        await engine.dispose()
    return (*counts, tuple(gens))


@pytest.fixture
def hostile_settings(database_url: str) -> Settings:
    """Default limits, except body and event limits small enough to reach quickly."""
    return make_settings(database_url, max_body_bytes=MAX_BODY, max_event_bytes=MAX_EVENT)


@pytest.fixture
async def seeded(hostile_settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client and a seeded generation (stream `hostile`, two events) to aim at."""
    async with app_client(hostile_settings) as http:
        token = (await http.post(OPEN)).json()["generation"]
        appended = await http.post(
            f"/v1/generations/{token}/events", json={"events": [{"data": "a"}, {"data": "b"}]}
        )
        assert appended.status_code == 201
        yield http, token


def assert_problem(answer: httpx.Response, status: int, code: str) -> None:
    """A problem+json of that status with that stable code."""
    assert answer.status_code == status, answer.text[:500]
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.headers
    problem = answer.json()
    assert (problem["status"], problem["code"]) == (status, code), problem
    assert problem["type"] == f"urn:mcp-eventlog:problem:{code}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_hostile_request_is_refused_and_stores_nothing(
    case: Case, seeded: tuple[httpx.AsyncClient, str], hostile_settings: Settings
) -> None:
    """Each hostile request: its 4xx problem+json and stable code; the database unchanged."""
    http, token = seeded
    before = await fingerprint(hostile_settings.database_url)
    answer = await http.request(case.method, case.path.format(token=token), **case.kwargs)
    assert_problem(answer, case.status, case.code)
    assert await fingerprint(hostile_settings.database_url) == before


@pytest.mark.parametrize("claim", list(HOSTILE_IDS), ids=[repr(c)[:40] for c in HOSTILE_IDS])
async def test_hostile_resume_id_is_invalid_and_stores_nothing(
    claim: str, seeded: tuple[httpx.AsyncClient, str], hostile_settings: Settings
) -> None:
    """A hostile `Last-Event-ID` is an `invalid` verdict (never a reset, never a 5xx)."""
    http, token = seeded
    before = await fingerprint(hostile_settings.database_url)
    for url in (RESUME, "/v1/resume"):
        answer = await http.post(url, json={"last_event_id": claim.format(token=token)})
        assert answer.status_code == 200, answer.text
        verdict = answer.json()
        assert (verdict["verdict"], verdict["reason"]) == ("invalid", HOSTILE_IDS[claim])
        assert (verdict["events"], verdict["generation"]) == ([], None)
    assert await fingerprint(hostile_settings.database_url) == before


async def test_sql_metacharacters_in_data_are_stored_verbatim(
    seeded: tuple[httpx.AsyncClient, str], hostile_settings: Settings
) -> None:
    """Data and stream ids that look like SQL are just text: stored and read back exactly."""
    http, _ = seeded
    stream = "a=1+OR+1=1--"  # only allowed characters, yet SQL-looking
    token = (await http.post(f"/v1/streams/{stream}/generations")).json()["generation"]
    nasty = ["'); DROP TABLE events; --", "\\x00\\'", "%s %(data)s $1 ?", "ü\u2028\r\n"]
    answer = await http.post(
        f"/v1/generations/{token}/events", json={"events": [{"data": d} for d in nasty]}
    )
    assert answer.status_code == 201, answer.text
    page = (await http.get(f"/v1/generations/{token}/events")).json()
    assert [e["data"] for e in page["events"]] == nasty
    counts = await fingerprint(hostile_settings.database_url)
    assert counts[:3] == (2, 2, 6)


def _raw_request(port: int, head: bytes, chunks: list[bytes], pause: float) -> bytes:
    """Send a request over a plain socket, pausing between chunks; return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        for chunk in chunks:
            time.sleep(pause)
            sock.sendall(chunk)
        sock.settimeout(10)
        answer = b""
        while data := sock.recv(65536):
            answer += data
            if b"\r\n\r\n" in answer and answer.endswith(b"}"):
                break
        return answer


@pytest.fixture
def short_timeout_server(database_url: str, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A real server whose body timeout is 1 s instead of 30 s."""
    process = ServerProcess(
        database_url,
        log_path=tmp_path / "server.log",
        env={"EVENTLOG_BODY_TIMEOUT_SECONDS": "1"},
    )
    process.start()
    yield process  # type: ignore[misc]
    process.stop()


@pytest.mark.process
async def test_slow_and_truncated_bodies_store_nothing(
    short_timeout_server: ServerProcess, database_url: str
) -> None:
    """A body slower than the timeout is 408 `body_timeout`; a truncated one stores nothing."""
    server = short_timeout_server
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        token = (await http.post(OPEN)).json()["generation"]
    before = await fingerprint(database_url)
    payload = json.dumps({"events": [{"data": "slow"}]}).encode()
    head = (
        f"POST /v1/generations/{token}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    slow = _raw_request(server.port, head, [payload[:5], payload[5:10], payload[10:]], 0.6)
    assert slow.startswith(b"HTTP/1.1 408"), slow[:200]
    assert b"application/problem+json" in slow
    assert b'"code":"body_timeout"' in slow
    truncated_head = head.replace(f"{len(payload)}".encode(), f"{len(payload) + 50}".encode())
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(truncated_head + payload)  # 50 bytes short, then the client goes away
    chunked = head.replace(
        f"Content-Length: {len(payload)}".encode(), b"Transfer-Encoding: chunked"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(chunked + b"%x\r\n" % len(payload) + payload[:-3])  # cut mid-chunk
    await asyncio.sleep(1.5)  # let the server notice the disconnects (and the 1 s timeout pass)
    assert await fingerprint(database_url) == before
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        assert (await http.get("/healthz")).status_code == 200


ADMIN_QUERIES = [
    "/admin/v1/decisions?stream_id=a%00b",
    "/admin/v1/decisions?tenant=a%00",
    "/admin/v1/streams?tenant=a%00",
    "/admin/v1/streams?prefix=a%00",
]


@pytest.mark.parametrize("path", ADMIN_QUERIES)
async def test_nul_in_admin_query_is_refused(
    path: str, seeded: tuple[httpx.AsyncClient, str]
) -> None:
    """NUL can be in no stream id, tenant or prefix: refused as 422, never a 5xx.

    (Found by schemathesis: PostgreSQL answered 500 until 995eaa6.)
    """
    http, _ = seeded
    assert_problem(await http.get(path), 422, "validation_error")


UNSTORABLE_TENANT = "tenant-\ud800"  # no database stores it: the UTF-8 codec refuses it


async def test_a_lone_surrogate_stops_nothing_end_to_end(
    hostile_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """The request that used to kill the audit flusher is a 422; an entry that
    still reaches the audit log unstorable costs only itself; later decisions are written
    by the background flusher, /readyz stays honest, and shutdown is clean."""
    async with started_app(hostile_settings) as (app, http):
        container = state_of(app).container
        token = (await http.post(OPEN)).json()["generation"]
        json_type = {"content-type": "application/json"}
        for path in (RESUME, "/v1/resume", "/admin/v1/explain"):
            answer = await http.post(
                path, content=b'{"last_event_id": "\\ud800:1"}', headers=json_type
            )
            assert_problem(answer, 422, "validation_error")
        # Past the API (as a future bug might let one through): through the same observer
        # the service reports every decision to.
        decision = decide(parse_event_id("\ud800:1"), asked_stream=None, generation=None)
        container.observer.decided(
            Decided(UNSTORABLE_TENANT, None, "x:1", decision.verdict, decision.reason, None, 0)
        )
        for seq in (0, 1, 2):
            verdict = await http.post(RESUME, json={"last_event_id": f"{token}:{seq}"})
            assert verdict.status_code == 200

        async def three_recorded() -> bool:  # by the background flusher, every 0.25 s
            return len(await _recorded(container.database)) == 3

        await until(three_recorded)
        assert (await http.get("/readyz")).status_code == 200
        assert container.background.down == frozenset()
        metrics = (await http.get("/metrics")).text
        assert "eventlog_decision_log_dropped_total 1.0" in metrics
        assert "eventlog_background_task_failures_total{" not in metrics
        assert [e.last_event_id for e in await _recorded(container.database)] == [
            f"{token}:0",
            f"{token}:1",
            f"{token}:2",
        ]
    # Shutdown ran (the lifespan exited without an error); the one error is the dropped entry.
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.name for r in errors] == ["app.service.audit"]
    assert "dropped" in errors[0].getMessage()
    for record in caplog.records:  # a UTF-8 log (a file, a collector) can write every line
        record.getMessage().encode("utf-8")


async def _recorded(database: Database) -> list[DecisionEntry]:
    rows = await database.read(lambda conn: decisions.recent(conn, DecisionFilter(), 100))
    return list(reversed(rows))


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v1/streams?tenant=%ED%A0%80",
        "/admin/v1/decisions?tenant=%ED%A0%80",
        "/v1/streams/%ED%A0%80",
        "/v1/generations/%ED%A0%80/events",
    ],
)
async def test_surrogate_bytes_in_a_path_or_query_never_become_a_500(
    path: str, seeded: tuple[httpx.AsyncClient, str]
) -> None:
    """Percent-escapes that would encode a surrogate decode to U+FFFD, never to a surrogate:
    an answer (refused or empty), never a 5xx."""
    http, _ = seeded
    answer = await http.get(path)
    assert answer.status_code < 500, answer.text
