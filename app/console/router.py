"""Serves the console's static files at `/admin/ui/`, with a strict security policy.

Only the files shipped in `app/console/static/` are served (read once, on first use, and
kept in memory: they are a few tens of kilobytes). The shell carries no data, so no key
is asked for here; the admin API it calls asks for one on every request.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from fastapi import APIRouter, Request, Response
from starlette.exceptions import HTTPException

PREFIX = "/admin/ui"

# No inline script or style, nothing from another origin, no framing, no plugins, and
# Trusted Types with no policy: assigning a string to innerHTML throws, so event data can
# only ever reach the page as text.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Revalidate every time (cheap: ETag), so an upgraded service never runs stale modules.
    "Cache-Control": "no-cache",
}

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class Asset:
    """One static file, ready to send."""

    body: bytes
    media_type: str
    etag: str


@functools.cache
def assets() -> dict[str, Asset]:
    """Every servable file under `static/`, by its path relative to it (`js/main.js`)."""
    found: dict[str, Asset] = {}
    _collect(resources.files("app.console") / "static", "", found)
    return found


def _collect(folder: Traversable, prefix: str, found: dict[str, Asset]) -> None:
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            _collect(entry, name + "/", found)
            continue
        media_type = MEDIA_TYPES.get("." + name.rpartition(".")[2])
        if media_type is None:
            continue  # only the kinds of file the console is made of
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        found[name] = Asset(body, media_type, etag)


router = APIRouter(include_in_schema=False)


@router.get(PREFIX)
async def console_root() -> Response:
    """Redirect to the trailing slash, so the page's relative URLs resolve under it."""
    # Relative, so it also works behind a proxy that mounts the service under a prefix.
    return Response(status_code=308, headers={"Location": "ui/", **SECURITY_HEADERS})


@router.get(PREFIX + "/")
async def console_page(request: Request) -> Response:
    """The console's page (the shell: no data until the operator signs in)."""
    return _send(request, "index.html")


@router.get(PREFIX + "/{asset:path}")
async def console_asset(asset: str, request: Request) -> Response:
    """One of the console's modules, its style sheet or its icon."""
    return _send(request, asset)


def _send(request: Request, name: str) -> Response:
    found = assets().get(name)
    if found is None:
        # Rendered as problem+json by the API's one error handler, as every other 404 is:
        # the console speaks HTTP only and knows nothing of the API's modules.
        raise HTTPException(404, "the console has no such file", headers=SECURITY_HEADERS)
    headers = {"ETag": found.etag, **SECURITY_HEADERS}
    if found.etag in _etags(request.headers.get("if-none-match")):
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


def _etags(header: str | None) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in (header or "").split(",")}
