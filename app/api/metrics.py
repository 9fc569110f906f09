"""Prometheus metrics: HTTP requests by route template, verdicts, appends, retention.

Each app has its own registry (no import-time globals), served at `GET /metrics`. Labels
are route templates and codes only, never stream ids, tokens or tenants, so the number of
series stays bounded whatever the traffic.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import Scope

from app import __version__
from app.domain.append import AppendConflict
from app.domain.outcomes import BatchAcknowledged, Decided, RetentionPass
from app.domain.tasks import TaskStatus
from app.service.observer import Observer

UNMATCHED_ROUTE = "<unmatched>"
# The methods a label names; any other (a caller may send any token as a method) is
# `other`, so invented methods cannot add series.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
OTHER_METHOD = "other"


class Metrics(Observer):
    """The service's counters and histograms, in one registry; an observer of the use cases."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        http = ("method", "route", "status")
        self.requests = Counter("eventlog_http_requests", "HTTP requests", http, registry=r)
        self.latency = Histogram(
            "eventlog_http_request_duration_seconds", "HTTP request latency", http, registry=r
        )
        self.verdicts = _counter(r, "resume_verdicts", "Resume decisions", "verdict", "reason")
        self.appends = _counter(r, "appends", "Accepted append batches", "duplicate")
        self.appended_events = _counter(r, "appended_events", "Events stored by appends")
        self.evicted_events = _counter(
            r, "evicted_events", "Events evicted past a generation's max_events"
        )
        self.refused_appends = _counter(r, "refused_appends", "Refused append batches", "refusal")
        self.fenced_appends = _counter(
            r, "fenced_appends", "Appends refused as superseded (stale producer)"
        )
        self.retention_runs = _counter(r, "retention_runs", "Retention passes", "outcome")
        # For the alert "retention stopped": a pass that fails or hangs never sets it.
        self.retention_last_run = _gauge(
            r,
            "retention_last_run_timestamp_seconds",
            "Unix time the last retention pass that ran in this process ended (0: none yet)",
        )
        self.abandoned_generations = _counter(
            r,
            "abandoned_generations",
            "Generations this process recorded as abandoned (their writer's lease ran out)",
        )
        self.expired_generations = _counter(
            r, "expired_generations", "Generations made tombstones", "why"
        )
        self.purged_events = _counter(r, "purged_events", "Events deleted by retention")
        self.dropped_decisions = _counter(
            r,
            "decision_log_dropped",
            "Audit entries dropped (buffer full, or an entry the database refused)",
        )
        self._live_instruments(r)
        # The Prometheus idiom for "which release runs where": a constant 1 whose labels
        # say it (joined onto other series with `* on(instance) group_left(version)`).
        self.build_info = _gauge(r, "build_info", "The version of the service", "version")
        self.build_info.labels(__version__).set(1)
        self.background_failures = _counter(
            r, "background_task_failures", "Background tasks that died and were restarted", "task"
        )
        self.tasks_now = _gauge(
            r,
            "tasks",
            "Unexpired tasks by status, as the last task sweep of this process counted them",
            "status",
        )
        for status in TaskStatus:
            self.tasks_now.labels(status.value).set(0)
        self.tasks_worker_lost = _counter(
            r,
            "tasks_worker_lost",
            "Tasks this process settled failed/worker_lost (their worker's lease lapsed)",
        )

    def _live_instruments(self, r: CollectorRegistry) -> None:
        self.live_readers_now = _gauge(r, "live_readers", "Live readers this process serves now")
        self.live_events = _counter(r, "live_events_delivered", "Events sent to live readers")
        self.live_lag = Histogram(
            "eventlog_live_notify_lag_seconds",
            "From a commit to its wake-up reaching this process's live readers",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=r,
        )
        self.live_sources_up = _gauge(
            r,
            "live_wakeup_source_up",
            "1 while a wake-up source (postgresql, sqlite) is connected",
            "source",
        )

    def decided(self, decided: Decided) -> None:
        """Count a resume verdict by reason."""
        self.verdicts.labels(decided.verdict.value, decided.reason.value).inc()

    def appended(self, appended: BatchAcknowledged) -> None:
        """Count an accepted batch, its events and what it evicted."""
        self.appends.labels(str(appended.duplicate).lower()).inc()
        if not appended.duplicate:
            self.appended_events.inc(appended.count)
            self.evicted_events.inc(appended.evicted)

    def refused(self, refusal: AppendConflict) -> None:
        """Count a refused batch; `superseded` is also a fenced append."""
        self.refused_appends.labels(refusal.value).inc()
        if refusal is AppendConflict.SUPERSEDED:
            self.fenced_appends.inc()

    def retention_ran(self, report: RetentionPass) -> None:
        """Count a retention pass and what it removed."""
        self.retention_runs.labels("ran" if report.ran else "skipped_locked").inc()
        if report.ran:
            self.retention_last_run.set_to_current_time()
        self.expired_generations.labels("ttl").inc(report.expired)
        self.expired_generations.labels("cap").inc(report.capped)
        self.purged_events.inc(report.purged_events)

    def abandoned(self, count: int) -> None:
        """Count generations recorded as abandoned (by this process: each once, anywhere)."""
        self.abandoned_generations.inc(count)

    def audit_dropped(self, count: int) -> None:
        """Count audit entries dropped because the buffer was full."""
        self.dropped_decisions.inc(count)

    def live_readers(self, count: int) -> None:
        """How many live readers this process serves now."""
        self.live_readers_now.set(count)

    def live_delivered(self, count: int) -> None:
        """Count events sent to live readers."""
        self.live_events.inc(count)

    def live_notified(self, lag: float) -> None:
        """How long after its commit a change reached this process's readers."""
        self.live_lag.observe(lag)

    def live_source(self, source: str, up: bool) -> None:
        """Whether a wake-up source is connected."""
        self.live_sources_up.labels(source).set(1 if up else 0)

    def background_failed(self, task: str) -> None:
        """Count a background task that died (it is restarted)."""
        self.background_failures.labels(task).inc()

    def tasks_counted(self, counts: Mapping[str, int]) -> None:
        """Set the tasks-by-status gauge (every status, 0 when none)."""
        for status in TaskStatus:
            self.tasks_now.labels(status.value).set(counts.get(status.value, 0))

    def tasks_lost(self, count: int) -> None:
        """Count tasks settled worker_lost here."""
        self.tasks_worker_lost.inc(count)


def observe_request(metrics: Metrics, method: str, route: str, status: int, seconds: float) -> None:
    """Count and time one HTTP request (the front door calls it as the request ends)."""
    labels = (method_label(method), route, str(status))
    metrics.requests.labels(*labels).inc()
    metrics.latency.labels(*labels).observe(seconds)


def method_label(method: str) -> str:
    """The method as a metric label: one of `KNOWN_METHODS`, else `other`."""
    return method if method in KNOWN_METHODS else OTHER_METHOD


def route_template(scope: Scope) -> str:
    """The matched route's path template (`/v1/streams/{stream_id}/resume`), not the path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


def _counter(registry: CollectorRegistry, name: str, documentation: str, *labels: str) -> Counter:
    return Counter(f"eventlog_{name}", documentation, labels, registry=registry)


def _gauge(registry: CollectorRegistry, name: str, documentation: str, *labels: str) -> Gauge:
    return Gauge(f"eventlog_{name}", documentation, labels, registry=registry)
