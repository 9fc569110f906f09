"""One run of the service in a fresh interpreter, for `test_environment.py`.

`python -m tests.telemetry.untraced (block|allow) DATABASE_URL` builds the app from the
environment as `serve` does, opens a generation, appends, resumes, and prints as JSON what
it answered, which modules of the `otel` extra ended up imported, and what `app.telemetry`
warned. `block` makes their imports fail, as if the extra were not installed. (The
OpenTelemetry API is not the extra's: recent FastAPI releases depend on it themselves.)
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import logging
import sys
from importlib.machinery import ModuleSpec
from typing import Any

# What the `otel` extra brings beyond the API: the SDK, the exporters, the instrumentations.
EXTRA = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation")


def of_the_extra(name: str) -> bool:
    """Whether module `name` is one the `otel` extra installs."""
    return any(name == package or name.startswith(f"{package}.") for package in EXTRA)


class NotInstalled(importlib.abc.MetaPathFinder):
    """Finds the extra's modules nowhere, as when it is not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if of_the_extra(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class Kept(logging.Handler):
    """Keeps the messages logged."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def serve_once(database_url: str) -> dict[str, Any]:
    """Open, append and resume through the app `create_app` builds from the environment."""
    import httpx

    from app.api.app import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url=database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            token = (await client.post("/v1/streams/s/generations")).json()["generation"]
            batch = {"events": [{"data": "one"}, {"data": "two"}]}
            appended = await client.post(f"/v1/generations/{token}/events", json=batch)
            resumed = await client.post(
                "/v1/streams/s/resume", json={"last_event_id": f"{token}:1"}
            )
    answer = resumed.json()
    return {
        "appended": appended.status_code,
        "verdict": answer["verdict"],
        "events": [e["data"] for e in answer["events"]],
        "instrumented": bool(getattr(app, "_is_instrumented_by_opentelemetry", False)),
    }


def main() -> None:
    mode, database_url = sys.argv[1], sys.argv[2]
    if mode == "block":
        sys.meta_path.insert(0, NotInstalled())
    kept = Kept()
    logging.getLogger("app.telemetry").addHandler(kept)
    result = asyncio.run(serve_once(database_url))
    result["imported"] = sorted(m for m in sys.modules if of_the_extra(m))
    result["warnings"] = kept.messages
    print(json.dumps(result))


if __name__ == "__main__":
    main()
