"""The gateway's metrics (`app/gateway/metrics.py`): registered on the registry they are
given, under the names `/metrics` serves."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from app.gateway.metrics import GatewayMetrics


def test_each_metric_is_on_the_given_registry_under_its_name() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    metrics.requests.labels("POST", "200", "2025-11-25").inc()
    metrics.recorded.inc(3)
    metrics.unstored.inc()
    metrics.resumes.labels("invalid", "cross_session").inc()
    metrics.upstream_errors.labels("lost").inc()
    metrics.upstream_latency.observe(0.25)
    metrics.recordings.inc()
    value = registry.get_sample_value
    labels = {"method": "POST", "status": "200", "revision": "2025-11-25"}
    assert value("eventlog_gateway_requests_total", labels) == 1
    assert value("eventlog_gateway_recorded_messages_total") == 3
    assert value("eventlog_gateway_unstored_messages_total") == 1
    resumes = {"verdict": "invalid", "reason": "cross_session"}
    assert value("eventlog_gateway_resumes_total", resumes) == 1
    assert value("eventlog_gateway_upstream_errors_total", {"kind": "lost"}) == 1
    assert value("eventlog_gateway_upstream_latency_seconds_count") == 1
    assert value("eventlog_gateway_recordings") == 1


def test_two_registries_hold_two_sets() -> None:
    GatewayMetrics(CollectorRegistry())
    GatewayMetrics(CollectorRegistry())  # no "Duplicated timeseries": nothing global
