"""The spans a traced service makes, on SQLite and PostgreSQL: a request's SERVER span, its
decision span with the verdict, and a CLIENT span per statement beneath them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from app.telemetry.tracing import DECISION_SPAN
from tests.telemetry.conftest import children, request_span, statement, trace_of

RESUME_ROUTE = "POST /v1/streams/{stream_id}/resume"


async def _open(client: httpx.AsyncClient, stream: str, events: int) -> str:
    opened = await client.post(f"/v1/streams/{stream}/generations")
    assert opened.status_code == 201, opened.text
    token: str = opened.json()["generation"]
    if events:
        batch = {"events": [{"data": f"event {i}"} for i in range(events)]}
        appended = await client.post(f"/v1/generations/{token}/events", json=batch)
        assert appended.status_code == 201, appended.text
    return token


async def test_a_resume_is_traced_from_request_to_decision_to_database(
    traced: httpx.AsyncClient, exporter: InMemorySpanExporter, backend: str
) -> None:
    token = await _open(traced, "traced", events=3)
    exporter.clear()

    answer = await traced.post("/v1/streams/traced/resume", json={"last_event_id": f"{token}:1"})

    assert answer.json()["verdict"] == "resume"
    spans = exporter.get_finished_spans()
    request = request_span(spans, RESUME_ROUTE)
    trace = trace_of(spans, request)
    [decision] = children(trace, request)
    assert decision.name == DECISION_SPAN
    assert dict(decision.attributes or {}) == {
        "eventlog.verdict": "resume",
        "eventlog.reason": "ok",
        "eventlog.delivered_events": 2,
        "eventlog.claimed_generation": token,
        "eventlog.delivered_generation": token,
    }
    database = children(trace, decision)
    assert database, "the decision's statements are its children"
    assert all(s.kind is SpanKind.CLIENT for s in database)
    assert {(s.attributes or {}).get("db.system") for s in database} == {backend}
    statements = [statement(s) for s in database]
    assert any("FROM generations" in s for s in statements), statements
    assert any("FROM events" in s for s in statements), statements
    # Nothing else of this trace hangs outside the request.
    assert {s.name for s in trace} == {RESUME_ROUTE, DECISION_SPAN, *(s.name for s in database)}


@pytest.mark.parametrize(
    ("claim", "asked", "verdict", "reason", "claimed", "delivered", "events"),
    [
        ("{old}:1", "traced", "reset", "superseded", "old", "new", 1),
        ("{new}:9", "traced", "invalid", "beyond_tail", "new", None, 0),
        ("{new}:0", "elsewhere", "invalid", "cross_stream", "new", None, 0),
        ("Zm9vYmFyYmF6cXV4cXV1eA:3", "traced", "invalid", "unknown_generation", None, None, 0),
        ("not an id", "traced", "invalid", "malformed_id", None, None, 0),
    ],
)
async def test_every_verdict_is_on_its_decision_span(
    traced: httpx.AsyncClient,
    exporter: InMemorySpanExporter,
    claim: str,
    asked: str,
    verdict: str,
    reason: str,
    claimed: str | None,
    delivered: str | None,
    events: int,
) -> None:
    tokens = {"old": await _open(traced, "traced", events=2)}
    tokens["new"] = await _open(traced, "traced", events=1)
    exporter.clear()

    answer = await traced.post(
        f"/v1/streams/{asked}/resume", json={"last_event_id": claim.format(**tokens)}
    )

    assert (answer.json()["verdict"], answer.json()["reason"]) == (verdict, reason)
    [decision] = [s for s in exporter.get_finished_spans() if s.name == DECISION_SPAN]
    expected: dict[str, Any] = {
        "eventlog.verdict": verdict,
        "eventlog.reason": reason,
        "eventlog.delivered_events": events,
    }
    if claimed is not None:
        expected["eventlog.claimed_generation"] = tokens[claimed]
    if delivered is not None:
        expected["eventlog.delivered_generation"] = tokens[delivered]
    assert dict(decision.attributes or {}) == expected


async def test_an_operators_explain_is_a_decision_span_too(
    traced: httpx.AsyncClient, exporter: InMemorySpanExporter
) -> None:
    token = await _open(traced, "explained", events=2)
    exporter.clear()

    answer = await traced.post("/admin/v1/explain", json={"last_event_id": f"{token}:2"})

    assert answer.status_code == 200, answer.text
    spans = exporter.get_finished_spans()
    request = request_span(spans, "POST /admin/v1/explain")
    [decision] = children(trace_of(spans, request), request)
    assert (decision.attributes or {})["eventlog.verdict"] == "resume"


async def test_appends_are_traced_on_the_engine_that_writes_them(
    traced: httpx.AsyncClient, exporter: InMemorySpanExporter, backend: str
) -> None:
    token = await _open(traced, "written", events=0)
    exporter.clear()

    answer = await traced.post(
        f"/v1/generations/{token}/events", json={"events": [{"data": "a"}, {"data": "b"}]}
    )

    assert answer.status_code == 201, answer.text
    spans = exporter.get_finished_spans()
    request = request_span(spans, "POST /v1/generations/{generation}/events")
    # SQLite: a statement of its own; PostgreSQL: inside the append's one statement (a CTE).
    [insert] = [s for s in spans if "INSERT INTO events" in statement(s)]
    assert insert.kind is SpanKind.CLIENT
    if backend == "sqlite":
        # The group committer's thread: one transaction serves the writes of many requests,
        # so its statements start traces of their own, beside the requests'.
        assert insert.parent is None
        assert any(statement(s) == "BEGIN IMMEDIATE" for s in spans)
    else:
        assert insert in trace_of(spans, request)
