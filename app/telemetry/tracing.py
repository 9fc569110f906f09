"""OpenTelemetry traces of one service process (needs the `otel` extra; docs/traces.md).

Three kinds of span, each from the package that is kept for it where one exists:

- one SERVER span per HTTP request, named by its route template
  (opentelemetry-instrumentation-fastapi);
- `eventlog.decide` around each resume decision's one snapshot read, carrying its verdict
  and reason (`ReadPath` calls `decision`);
- one CLIENT span per SQL statement (opentelemetry-instrumentation-sqlalchemy's
  `EngineTracer`) on every engine the database runs SQL on: the async engine's (reads,
  PostgreSQL's writes) and SQLite's writer thread.

Spans carry no event data and never the `Last-Event-ID` as a client sent it: see
`decision_attributes`. Everything is tied to this process's own tracer provider, passed
explicitly; nothing is installed process-wide, so two apps in one process (the tests)
trace independently and an app built without tracing is untouched.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
from opentelemetry.instrumentation.sqlalchemy.version import (
    __version__ as sqlalchemy_instrumentation,
)
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util.types import AttributeValue

from app import __version__

if TYPE_CHECKING:
    from fastapi import FastAPI

    from app.service.reading import Reading
    from app.storage.database import Database

SERVICE_NAME = "mcp-eventlog"
DECISION_SPAN = "eventlog.decide"

# The OTLP protocols and the exporter (entry point) that speaks each; the `otel` extra
# installs the first, the specification's default.
_OTLP = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}


class Tracing:
    """A tracer provider and what it instruments: an app, a database, the decisions."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer("mcp_eventlog", __version__)
        # Traces only: the service's metrics are Prometheus's (app/api/metrics.py).
        self._meters = NoOpMeterProvider()

    @classmethod
    def exporting(cls, exporters: Sequence[str]) -> Tracing:
        """A provider that batches spans to the named exporters (`otlp`, `console`, …).

        The SDK reads the rest of `OTEL_*` itself: the resource (`OTEL_SERVICE_NAME`,
        `OTEL_RESOURCE_ATTRIBUTES`), the sampler (`OTEL_TRACES_SAMPLER`), the batching
        (`OTEL_BSP_*`) and each exporter's endpoint, headers and timeout.
        """
        provider = TracerProvider(resource=_resource())
        for name in exporters:
            provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
        return cls(provider)

    def instrument_app(self, app: FastAPI) -> None:
        """A SERVER span around every request the app serves (outermost, before any
        middleware), with the W3C `traceparent` of the caller as its parent."""
        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=self.provider,
            meter_provider=self._meters,
            # One span per ASGI message sent or received is noise, and costs per chunk.
            exclude_spans=["receive", "send"],
        )

    def instrument_database(self, database: Database) -> None:
        """A CLIENT span per statement on each engine of `database` (and on none other).

        `SQLAlchemyInstrumentor().instrument()` would also wrap `create_engine` and
        `Engine.connect` for the whole process, once per process; the package's own
        `EngineTracer` listens on exactly the engines given.
        """
        tracer = self.provider.get_tracer(
            "opentelemetry.instrumentation.sqlalchemy", sqlalchemy_instrumentation
        )
        meter = self._meters.get_meter("opentelemetry.instrumentation.sqlalchemy")
        usage = meter.create_up_down_counter("db.client.connections.usage")
        for engine in database.sync_engines:
            EngineTracer(tracer, engine, usage)  # type: ignore[no-untyped-call]

    async def decision(self, reading: Awaitable[Reading]) -> Reading:
        """Run a decision's read inside an `eventlog.decide` span (the statements it runs
        are its children) and record what was decided on it."""
        # Not the SDK's exception event: its stack trace would quote the chained driver
        # error, whose SQL parameters hold the claim as the client sent it.
        with self._tracer.start_as_current_span(
            DECISION_SPAN, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                decided = await reading
            except Exception as error:
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(StatusCode.ERROR)
                raise
            span.set_attributes(decision_attributes(decided))
            return decided

    def shutdown(self) -> None:
        """Export the spans still batched and stop (blocks up to the exporters' timeout)."""
        self.provider.shutdown()


def decision_attributes(reading: Reading) -> dict[str, AttributeValue]:
    """What a decision span says: the verdict and reason, how many events it delivers, and
    the generations involved by token.

    A token goes on the span only when the service found that generation, so it is one the
    service minted (128 random bits, the key of the decision log and of explain), never a
    string a client made up; the `Last-Event-ID` as sent (and its seq) never does, nor any
    event's data or type.
    """
    attributes: dict[str, AttributeValue] = {
        "eventlog.verdict": reading.decision.verdict.value,
        "eventlog.reason": reading.decision.reason.value,
        "eventlog.delivered_events": 0 if reading.page is None else len(reading.page.events),
    }
    if reading.claimed is not None:
        attributes["eventlog.claimed_generation"] = reading.claimed.token
    if reading.delivered is not None:
        attributes["eventlog.delivered_generation"] = reading.delivered.token
    return attributes


def _resource() -> Resource:
    """The SDK's resource from the environment; `mcp-eventlog` and its version unless it
    names the service (`OTEL_SERVICE_NAME`) or gives a version itself."""
    detected = Resource.create()
    attributes = dict(detected.attributes)
    if str(attributes.get("service.name", "")).startswith("unknown_service"):
        del attributes["service.name"]
    ours = Resource({"service.name": SERVICE_NAME, "service.version": __version__})
    return ours.merge(Resource(attributes, detected.schema_url))


def _exporter(name: str) -> SpanExporter:
    """The span exporter registered under `name`; `otlp` speaks the configured protocol."""
    if name == "otlp":
        protocol = _otlp_protocol()
        if protocol not in _OTLP:
            raise ValueError(f"unsupported OTLP protocol {protocol!r}: use {' or '.join(_OTLP)}")
        name = _OTLP[protocol]
    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER: no span exporter {name!r} is installed "
            "(the otel extra brings OTLP over HTTP and the console exporter)"
        )
    exporter: SpanExporter = next(iter(found)).load()()
    return exporter


def _otlp_protocol() -> str:
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return "http/protobuf"
