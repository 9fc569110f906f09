"""`/metrics` stays bounded whatever methods and paths a caller invents."""

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
