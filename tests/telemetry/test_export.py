"""`mcp-eventlog serve` with only `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its spans over
OTLP/HTTP, continuing the caller's W3C trace: checked with a real server process and a
small OTLP receiver standing in for a collector."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from app.telemetry.tracing import DECISION_SPAN
from tests.support.processes import running_server

pytestmark = pytest.mark.process

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
RESUME_ROUTE = "POST /v1/streams/{stream_id}/resume"


@dataclass
class Collector:
    """What an OTLP/HTTP trace receiver was sent: each request's body, and its spans."""

    bodies: list[bytes] = field(default_factory=list)
    spans: list[tuple[dict[str, Any], Span]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def take(self, body: bytes) -> None:
        export = ExportTraceServiceRequest.FromString(body)
        with self.arrived:
            self.bodies.append(body)
            for batch in export.resource_spans:
                resource = {a.key: _value(a.value) for a in batch.resource.attributes}
                self.spans += [(resource, s) for scope in batch.scope_spans for s in scope.spans]
            self.arrived.notify_all()

    def wait_for(self, name: str, timeout: float = 60.0) -> Span:
        """The first span named `name` of the caller's trace, once it has arrived."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                for _resource, span in self.spans:
                    if span.name == name and span.trace_id.hex() == TRACE_ID:
                        return span
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no span {name!r} in {[s.name for _r, s in self.spans]}")
                self.arrived.wait(left)


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value"))


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Collector]]:
    """An OTLP/HTTP receiver on 127.0.0.1; yields its endpoint and what it collects."""
    collector = Collector()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                collector.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200 if self.path == "/v1/traces" else 404)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_serve_sends_a_resumes_spans_to_the_configured_collector(tmp_path: Path) -> None:
    data = f"event-data-{tmp_path.name}"
    with otlp_receiver() as (endpoint, collector):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with running_server(env, cwd=tmp_path) as url:
            async with httpx.AsyncClient(base_url=url) as client:
                token = (await client.post("/v1/streams/exported/generations")).json()
                token = token["generation"]
                batch = {"events": [{"data": data}, {"data": data}]}
                await client.post(f"/v1/generations/{token}/events", json=batch)
                answer = await client.post(
                    "/v1/streams/exported/resume",
                    json={"last_event_id": f"{token}:1"},
                    headers={"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"},
                )
                assert answer.json()["verdict"] == "resume"

                decision = await asyncio.to_thread(collector.wait_for, DECISION_SPAN)
                request = await asyncio.to_thread(collector.wait_for, RESUME_ROUTE)

    assert request.parent_span_id.hex() == CALLER_SPAN
    assert request.kind == Span.SPAN_KIND_SERVER
    assert decision.parent_span_id == request.span_id
    attributes = {a.key: _value(a.value) for a in decision.attributes}
    assert (attributes["eventlog.verdict"], attributes["eventlog.reason"]) == ("resume", "ok")
    statements = [s for _r, s in collector.spans if s.parent_span_id == decision.span_id]
    assert statements
    assert all(s.kind == Span.SPAN_KIND_CLIENT for s in statements)
    assert {r["service.name"] for r, _s in collector.spans} == {"mcp-eventlog"}
    assert not any(data.encode() in body for body in collector.bodies)
