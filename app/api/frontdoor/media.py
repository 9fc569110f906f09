"""Bodies are strict JSON, declared as such, sent as they are.

The front door applies both checks to every request that may carry a body, before any
handler runs:

- `check_declared(scope)`: a request that declares a media type must declare JSON
  (`application/json`, `+json`), with a body or without one: a body-less form POST is what
  a cross-site `<form>` sends, so it is refused rather than treated as "no options". A body
  must declare its type, and a `Content-Encoding` (gzip, …) is not accepted: 415.
- `check_strict_json(body)`: the body is UTF-8 JSON with no key twice in one object and no
  string that is not valid UTF-8 (a `\\ud800` escape makes a lone surrogate, which no
  database, log or response can encode). FastAPI parses the body again for the handler;
  this pass only refuses what its parser lets through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from app.errors import InvalidJson, InvalidText, UnsupportedMediaType
from app.text import check_utf8, printable

# Only a \uD800-\uDFFF escape can make a surrogate out of valid UTF-8 text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def check_declared(headers: Mapping[bytes, bytes], *, with_body: bool) -> None:
    """Refuse (415) a declared media type that is not JSON, an untyped body, any encoding."""
    encoding = headers.get(b"content-encoding", b"").strip().lower()
    if encoding not in (b"", b"identity"):
        raise UnsupportedMediaType(
            f"Content-Encoding {printable(encoding.decode('latin-1'))!r} is not accepted; "
            "send the body as it is"
        )
    content_type = headers.get(b"content-type")
    if content_type is None:
        if with_body:
            raise UnsupportedMediaType("the body must be application/json, not untyped")
        return
    media_type = content_type.split(b";")[0].strip().lower().decode("latin-1")
    if media_type == "application/json" or media_type.endswith("+json"):
        return
    if not media_type and not with_body:
        return
    raise UnsupportedMediaType(f"the body must be application/json, not {media_type or 'untyped'}")


def check_strict_json(body: bytes) -> None:
    """Refuse what FastAPI's lenient `json.loads` would let through: 422 either way.

    `InvalidJson` for bytes that are not UTF-8, not JSON, or an object with a key twice;
    `InvalidText` for a string (key or value) that is not valid UTF-8.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJson("the body is not valid UTF-8") from None
    strict_json(text, "body")


def strict_json(text: str, what: str = "frame") -> Any:
    """The value of a JSON text, refused as `check_strict_json` refuses a body (`what`
    names it in the detail): the append channel parses each frame once, with this."""
    try:
        parsed = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise InvalidJson(
            f"the {what} is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except RecursionError:
        raise InvalidJson(f"the {what} is not valid JSON: nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text) is not None:
        _check_strings(parsed, what)
    return parsed


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # `json.loads` calls it for each object and lets its `InvalidJson` through as it is.
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise InvalidJson(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return found


def _check_strings(value: Any, where: str) -> None:
    # Only reached when the body holds a surrogate escape (paired ones are valid: emoji
    # sent by an ASCII-only encoder), so the walk is rare.
    if isinstance(value, str):
        try:
            check_utf8(value)
        except ValueError as error:
            raise InvalidText(f"{where}: {error}") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, where)
            _check_strings(item, f"{where}.{printable(key)}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}[{index}]")
