"""The HTTP ceiling: a FastAPI endpoint that parses an append body and stores nothing.

It is started exactly like the service (a uvicorn factory in its own process, access log
off, same log level), and validates the body with the service's own `AppendRequest`
schema, so the ratio service/no-op is what storage and the use case cost on top of
HTTP + JSON + validation. Its WebSocket `GET /v1/append` is the no-op append channel: each
text frame parsed as the service parses one (strict JSON, the `AppendFrame` schema) and
answered with an answer of the same shape, in order; nothing stored.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import uvicorn
from fastapi import FastAPI, WebSocket, WebSocketDisconnect, status

from app.api.frontdoor.media import strict_json
from app.api.schemas import AppendFrame, AppendRequest


def create_app() -> FastAPI:
    """A one-route app: `POST /v1/generations/{generation}/events` that only parses."""
    app = FastAPI(title="noop")

    @app.post("/v1/generations/{generation}/events", status_code=status.HTTP_201_CREATED)
    async def append_events(generation: str, body: AppendRequest) -> dict[str, object]:
        return {"generation": generation, "count": len(body.events)}

    @app.websocket("/v1/append")
    async def append_channel(websocket: WebSocket) -> None:
        await websocket.accept()
        tail: dict[str, int] = {}
        try:
            while True:
                frame = AppendFrame.model_validate(strict_json(await websocket.receive_text()))
                first = tail.get(frame.generation, 0) + 1
                tail[frame.generation] = last = first + len(frame.events) - 1
                ids = [f"{frame.generation}:{seq}" for seq in range(first, last + 1)]
                answer: dict[str, object] = {"id": frame.id, "status": 201}
                answer["generation"] = frame.generation
                answer |= {"event_ids": ids, "head_seq": 1, "tail_seq": last}
                answer |= {"terminal": False, "duplicate": False}
                await websocket.send_text(json.dumps(answer, separators=(",", ":")))
        except WebSocketDisconnect:
            return

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.baselines.noop --port P`."""
    parser = argparse.ArgumentParser(prog="bench.baselines.noop")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(
        "bench.baselines.noop:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=1,
        log_level="warning",
        access_log=False,
        ws_per_message_deflate=False,  # as `mcp-eventlog serve` runs it
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
