"""Bodies are JSON: anything else is refused with 415 before it is parsed."""

from __future__ import annotations

from fastapi import Request

from app.api.problems import UnsupportedMediaType


async def require_json_body(request: Request) -> None:
    """Refuse a non-empty body whose Content-Type is not JSON (`application/json`, `+json`)."""
    if request.method in ("GET", "HEAD", "OPTIONS", "DELETE"):
        return
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        return
    if not await request.body():
        return
    raise UnsupportedMediaType(f"the body must be application/json, not {media_type or 'untyped'}")
