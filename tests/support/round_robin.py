"""A load balancer without affinity, for the gateway's replica tests: every HTTP request
goes to the next backend in turn (per request, not per connection, so one client's
keep-alive connection alternates too), its response streamed back.

Run as `python -m tests.support.round_robin --port P URL1 URL2 …`; `GET /balancer/served`
answers how many requests each backend served, by method and JSON-RPC method.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "te", "upgrade"}


def balancer(backends: list[str]) -> Starlette:
    """The balancer's app over `backends` (base URLs)."""
    turn = itertools.cycle(range(len(backends)))
    served: list[Counter[str]] = [Counter() for _ in backends]
    client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0), trust_env=False)

    async def counts(request: Request) -> Response:
        return JSONResponse([dict(c) for c in served])

    async def forward(request: Request) -> Response:
        index = next(turn)
        body = await request.body()
        served[index][_label(request.method, body)] += 1
        url = httpx.URL(backends[index] + request.url.path, query=request.url.query.encode())
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        sent = client.build_request(request.method, url, headers=headers, content=body or None)
        answer = await client.send(sent, stream=True)
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        kept.pop("content-encoding", None)
        return StreamingResponse(
            _chunks(answer),
            status_code=answer.status_code,
            headers=kept,
            background=BackgroundTask(answer.aclose),
        )

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH"]
    routes = [
        Route("/balancer/served", counts, methods=["GET"]),
        Route("/{path:path}", forward, methods=methods),
    ]
    return Starlette(routes=routes)


async def _chunks(answer: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.aiter_bytes():
            yield chunk
    except httpx.HTTPError:
        return
    finally:
        await answer.aclose()


def _label(method: str, body: bytes) -> str:
    try:
        message = json.loads(body) if body else None
    except ValueError:
        message = None
    rpc = message.get("method") if isinstance(message, dict) else None
    return f"{method} {rpc}" if isinstance(rpc, str) else method


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("backends", nargs="+")
    args = parser.parse_args()
    app = balancer([b.rstrip("/") for b in args.backends])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
