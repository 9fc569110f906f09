"""The gateway's metrics, on the service's registry (served at `GET /metrics`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class GatewayMetrics:
    """Forwarded requests, recorded and unstored messages, resumes, upstream health."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter(
            "eventlog_gateway_requests",
            "Requests forwarded to the upstream MCP server",
            ["method", "status", "revision"],
            registry=r,
        )
        self.recorded = Counter(
            "eventlog_gateway_recorded_messages", "Messages stored before relaying", registry=r
        )
        self.unstored = Counter(
            "eventlog_gateway_unstored_messages",
            "Messages relayed without an id (the log could not store them)",
            registry=r,
        )
        self.resumes = Counter(
            "eventlog_gateway_resumes",
            "Last-Event-ID reconnects answered from the log",
            ["verdict", "reason"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "eventlog_gateway_upstream_errors",
            "Upstream failures: unreachable, lost mid-stream, malformed",
            ["kind"],
            registry=r,
        )
        self.upstream_latency = Histogram(
            "eventlog_gateway_upstream_latency_seconds",
            "Time to the upstream's response headers",
            registry=r,
        )
        self.recordings = Gauge(
            "eventlog_gateway_recordings", "Upstream responses being recorded now", registry=r
        )
