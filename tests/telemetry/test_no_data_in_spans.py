"""No span carries event data, nor a `Last-Event-ID` the way a client sent it.

Every route a writer or an operator uses with data or a claim in it is called (accepted,
retried, refused, malformed), the decision log is flushed (its writes are traced too), and
then every span is searched whole (name, attributes, events such as recorded exceptions,
links, status and resource) for each marker.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import httpx
from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from app.api.app import create_app
from app.telemetry.tracing import DECISION_SPAN, Tracing
from tests.support.app import BASE_URL, make_settings, state_of
from tests.telemetry.conftest import statement


async def _call_everything(client: httpx.AsyncClient, markers: dict[str, str]) -> None:
    data, event_type = markers["data"], markers["type"]
    token = (await client.post("/v1/streams/private/generations")).json()["generation"]
    markers["claim"] = f"{token}:0"  # well formed and found: still never on a span as sent
    batch = {"events": [{"data": data, "event": event_type}, {"data": data}], "first_seq": 1}
    assert (await client.post(f"/v1/generations/{token}/events", json=batch)).status_code == 201
    retried = await client.post(f"/v1/generations/{token}/events", json=batch)
    assert retried.status_code == 200, retried.text
    out_of_order = {"events": [{"data": data}], "first_seq": 7}
    refused = await client.post(f"/v1/generations/{token}/events", json=out_of_order)
    assert refused.status_code == 409, refused.text
    unparsable = {"events": [{"data": data, "unexpected": event_type}]}
    invalid = await client.post(f"/v1/generations/{token}/events", json=unparsable)
    assert invalid.status_code == 422, invalid.text
    page = await client.get(f"/v1/generations/{token}/events", params={"after": 0})
    assert page.json()["events"][0]["data"] == data
    resumed = await client.post(
        "/v1/streams/private/resume", json={"last_event_id": markers["claim"]}
    )
    assert resumed.json()["events"][0]["data"] == data
    for claim in (markers["malformed"], f"{markers['unknown']}:1"):
        for path in ("/v1/streams/private/resume", "/v1/resume", "/admin/v1/explain"):
            answer = await client.post(path, json={"last_event_id": claim})
            assert answer.json()["verdict"] == "invalid", answer.text
    admin_page = await client.get(f"/admin/v1/generations/{token}/events")
    assert admin_page.json()["events"][0]["data"] == data


async def test_no_span_carries_event_data_or_a_claim_as_sent(
    traced_app: tuple[FastAPI, httpx.AsyncClient], exporter: InMemorySpanExporter
) -> None:
    app, client = traced_app
    unique = uuid.uuid4().hex
    markers = {
        "data": f"secret-event-data-{unique}",
        "type": f"secret-event-type-{unique}",
        "malformed": f"not an id: secret-claim-{unique}",
        "unknown": f"secretToken{unique}",
    }
    await _call_everything(client, markers)
    await state_of(app).container.audit.flush()  # the decision log's writes, traced too

    spans = exporter.get_finished_spans()
    assert any(s.name == DECISION_SPAN for s in spans)
    assert any("INSERT INTO events" in statement(s) for s in spans)  # PostgreSQL: in a CTE
    assert any(statement(s).startswith("INSERT INTO decisions") for s in spans)
    for span in spans:
        whole = span.to_json()
        for what, marker in markers.items():
            assert marker not in whole, f"{what} in span {span.name}"


async def test_a_failed_decision_is_an_error_span_without_the_claim(
    tmp_path: Path, sqlite_template: Path
) -> None:
    path = tmp_path / "eventlog.db"
    shutil.copyfile(sqlite_template, path)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(make_settings(f"sqlite+aiosqlite:///{path}"), Tracing(provider))
    claim = f"secretToken{uuid.uuid4().hex}:1"
    async with app.router.lifespan_context(app):
        with closing(sqlite3.connect(path)) as broken:  # the read's table goes: SELECT fails
            broken.execute("ALTER TABLE generations RENAME TO generations_gone")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            answer = await client.post("/v1/resume", json={"last_event_id": claim})

    assert answer.status_code == 503, answer.text
    spans = exporter.get_finished_spans()
    [decision] = [s for s in spans if s.name == DECISION_SPAN]
    assert decision.status.status_code is StatusCode.ERROR
    assert (decision.attributes or {})["error.type"] == "StorageUnavailable"
    for span in spans:
        assert claim.split(":")[0] not in span.to_json(), span.name
