"""An app traced into memory: every span it ends is kept by an `InMemorySpanExporter`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from app.api.app import create_app
from app.settings import Settings
from app.telemetry.tracing import Tracing
from tests.support.app import BASE_URL


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Where the traced app's spans go, each as soon as it ends."""
    return InMemorySpanExporter()


@pytest.fixture
async def traced_app(
    settings: Settings, exporter: InMemorySpanExporter
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app on the test's database, traced into `exporter`, lifespan included."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(settings, Tracing(provider))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield app, client


@pytest.fixture
async def traced(traced_app: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    """A client of the traced app."""
    return traced_app[1]


def request_span(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    """The one SERVER span named `name` (`METHOD /route/{template}`)."""
    found = [s for s in spans if s.kind is SpanKind.SERVER and s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def trace_of(spans: tuple[ReadableSpan, ...], root: ReadableSpan) -> list[ReadableSpan]:
    """The spans of `root`'s trace."""
    assert root.context is not None
    return [
        s for s in spans if s.context is not None and s.context.trace_id == root.context.trace_id
    ]


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    """The spans whose parent is `parent`."""
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def statement(span: ReadableSpan) -> str:
    """A database span's SQL (by the old or the stable semantic conventions' name)."""
    attributes = span.attributes or {}
    return str(attributes.get("db.statement", attributes.get("db.query.text", "")))
