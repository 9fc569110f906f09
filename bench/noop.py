"""The HTTP ceiling: a FastAPI endpoint that parses an append body and stores nothing.

It is started exactly like the service (a uvicorn factory in its own process, access log
off, same log level), and validates the body with the service's own `AppendRequest`
schema, so the ratio service/no-op is what storage and the use case cost on top of
HTTP + JSON + validation.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import uvicorn
from fastapi import FastAPI, status

from app.api.schemas import AppendRequest


def create_app() -> FastAPI:
    """A one-route app: `POST /v1/generations/{generation}/events` that only parses."""
    app = FastAPI(title="noop")

    @app.post("/v1/generations/{generation}/events", status_code=status.HTTP_201_CREATED)
    async def append_events(generation: str, body: AppendRequest) -> dict[str, object]:
        return {"generation": generation, "count": len(body.events)}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.noop --port P`."""
    parser = argparse.ArgumentParser(prog="bench.noop")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(
        "bench.noop:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=1,
        log_level="warning",
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
