"""`/readyz`, `/metrics` and the logs, on both databases."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
from pathlib import Path

import httpx
import pytest
from alembic import command

from app.logs import JsonFormatter, RequestIdFilter, logging_config
from app.storage.migrate import alembic_config
from tests.support.app import app_client, make_settings


async def test_ready_when_the_schema_is_at_head(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_not_ready_when_the_schema_is_behind(tmp_path: Path, sqlite_template: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite+aiosqlite:///{path}"
    await asyncio.to_thread(command.downgrade, alembic_config(url), "0001")
    async with app_client(make_settings(url)) as http:
        response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "schema_not_current"
    assert "0001" in response.json()["detail"]


async def test_not_ready_when_the_database_does_not_answer(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'no-such-dir' / 'eventlog.db'}"
    async with app_client(make_settings(url)) as http:
        response = await http.get("/readyz")
        alive = await http.get("/healthz")
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert alive.status_code == 200  # alive, just not ready


def _sample(exposition: str, name: str, **labels: str) -> float:
    for line in exposition.splitlines():
        if not line.startswith(name):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if line.split("{")[0].split(" ")[0] == name and found == labels:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_metrics_count_requests_verdicts_appends_evictions_and_fencing(
    client: httpx.AsyncClient,
) -> None:
    old = (await client.post("/v1/streams/s1/generations", json={"max_events": 2})).json()
    events = {"events": [{"data": "a"}, {"data": "b"}, {"data": "c"}]}
    assert (
        await client.post(f"/v1/generations/{old['generation']}/events", json=events)
    ).is_success
    await client.post("/v1/streams/s1/generations")
    fenced = await client.post(f"/v1/generations/{old['generation']}/events", json=events)
    assert fenced.status_code == 409
    await client.post("/v1/streams/s1/resume", json={"last_event_id": f"{old['generation']}:3"})
    await client.post("/v1/resume", json={"last_event_id": "nope"})
    text = (await client.get("/metrics")).text
    route = "/v1/generations/{generation}/events"
    assert _sample(text, "eventlog_http_requests_total", method="POST", route=route, status="201")
    assert (
        _sample(text, "eventlog_http_requests_total", method="POST", route=route, status="409") == 1
    )
    assert (
        _sample(
            text,
            "eventlog_http_request_duration_seconds_count",
            method="POST",
            route="/v1/streams/{stream_id}/resume",
            status="200",
        )
        == 1
    )
    assert _sample(text, "eventlog_resume_verdicts_total", verdict="reset", reason="superseded")
    assert (
        _sample(text, "eventlog_resume_verdicts_total", verdict="invalid", reason="malformed_id")
        == 1
    )
    assert _sample(text, "eventlog_appends_total", duplicate="false") == 1
    assert _sample(text, "eventlog_appended_events_total") == 3
    assert _sample(text, "eventlog_evicted_events_total") == 1
    assert _sample(text, "eventlog_fenced_appends_total") == 1
    assert _sample(text, "eventlog_refused_appends_total", refusal="superseded") == 1
    # Labels are route templates: no stream id or token ever becomes a series.
    assert "s1" not in text
    assert old["generation"] not in text


async def test_one_log_line_per_request_with_its_id_and_never_event_data(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    opened = await client.post("/v1/streams/s1/generations", headers={"X-Request-ID": "req-42"})
    assert opened.headers["x-request-id"] == "req-42"
    token = opened.json()["generation"]
    appended = await client.post(
        f"/v1/generations/{token}/events", json={"events": [{"data": "TOP-SECRET-PAYLOAD"}]}
    )
    generated = appended.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    insane = await client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert insane.headers["x-request-id"] != "bad id\twith spaces"
    access = [r for r in caplog.records if r.name == "app.access"]
    assert len(access) == 3
    first = access[0]
    assert (first.request_id, first.route, first.status) == (  # type: ignore[attr-defined]
        "req-42",
        "/v1/streams/{stream_id}/generations",
        201,
    )
    assert access[1].request_id == generated  # type: ignore[attr-defined]
    assert "TOP-SECRET-PAYLOAD" not in caplog.text


async def test_an_invalid_verdict_is_a_warning_with_the_request_id(
    client: httpx.AsyncClient,
) -> None:
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    handler.addFilter(RequestIdFilter())  # as the configured handler stamps every line
    audit_log = logging.getLogger("app.service.audit")
    audit_log.addHandler(handler)
    try:
        await client.post(
            "/v1/resume",
            json={"last_event_id": "AAAAAAAAAAAAAAAAAAAAAA:1"},
            headers={"X-Request-ID": "r1"},
        )
        token = (await client.post("/v1/streams/s1/generations")).json()["generation"]
        await client.post("/v1/streams/s1/resume", json={"last_event_id": f"{token}:0"})
    finally:
        audit_log.removeHandler(handler)
    warnings = [r for r in seen if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "unknown_generation" in warnings[0].getMessage()
    assert warnings[0].request_id == "r1"  # type: ignore[attr-defined]


def test_json_log_lines() -> None:
    record = logging.makeLogRecord(
        {"name": "app.access", "levelname": "INFO", "msg": "GET %s", "args": ("/x",)}
    )
    record.route = "/x"
    RequestIdFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert (line["message"], line["route"], line["request_id"], line["level"]) == (
        "GET /x",
        "/x",
        None,
        "info",
    )
    config = logging_config(make_settings("sqlite://", log_format="json"))
    assert config["formatters"]["main"]["()"].endswith("JsonFormatter")
    text = logging_config(make_settings("sqlite://"))["formatters"]["main"]
    assert text["()"].endswith("TextFormatter")


@pytest.mark.parametrize("level", ["debug", "info", "warning"])
def test_database_drivers_never_log_statements(level: str) -> None:
    # At DEBUG the drivers log each statement with its parameters: event data.
    config = logging_config(make_settings("sqlite://", log_level=level))
    floor = max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()])
    for driver in ("aiosqlite", "asyncpg", "sqlalchemy.engine"):
        assert config["loggers"][driver]["level"] == floor
