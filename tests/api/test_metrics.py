"""The metrics (`app/api/metrics.py`), on both databases: what is counted, and `/metrics`
stays bounded whatever methods and paths a caller invents."""

from __future__ import annotations

import re

import httpx

# The service's own routes and a few it does not have: 21 paths, each asked with 47 methods
# (the 7 it may answer and 40 invented ones).
_PATHS = (
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/streams/s/generations",
    "/v1/generations/g/events",
    "/v1/streams/s/resume",
    "/v1/resume",
    "/v1/streams/s",
    "/openapi.json",
    "/admin/v1/streams",
    "/admin/v1/streams/s",
    "/admin/v1/decisions",
    "/admin/v1/generations/g",
    "/console/",
    "/nope",
    "/v2/anything",
    "/admin/v1/nope",
    "/%2e%2e/x",
    "/v1/streams",
    "/v1/generations",
    "/a/b/c/d",
)
_KNOWN = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
_METHODS = _KNOWN + tuple(f"INVENTED{n}" for n in range(40))


def _request_series(exposition: str) -> set[str]:
    return {
        line.split(" ")[0]
        for line in exposition.splitlines()
        if line.startswith("eventlog_http_requests_total{")
    }


async def test_invented_methods_and_paths_do_not_grow_the_metrics(
    client: httpx.AsyncClient,
) -> None:
    assert (len(_PATHS), len(_METHODS)) == (21, 47)
    for path in _PATHS:
        for method in _METHODS:
            await client.request(method, path)
    exposition = (await client.get("/metrics")).text
    series = _request_series(exposition)
    methods = {re.search(r'method="([^"]*)"', s).group(1) for s in series}  # type: ignore[union-attr]
    assert methods <= {*_KNOWN, "other"}, sorted(methods - {*_KNOWN, "other"})
    assert "other" in methods
    # One series per (method label, route label, status): 8 method labels at most, the
    # service's routes plus one for every path no route matched.
    routes = {re.search(r'route="([^"]*)"', s).group(1) for s in series}  # type: ignore[union-attr]
    assert "<unmatched>" in routes
    assert not any(path in routes for path in ("/nope", "/v2/anything", "/a/b/c/d"))
    assert len(series) < 8 * len(routes) * 4, len(series)
    # Before: 13,704 samples (1.6 MB) after this script; the 47 methods now fall into 8.
    samples = [line for line in exposition.splitlines() if not line.startswith("#")]
    assert len(samples) < 4_000, len(samples)


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
