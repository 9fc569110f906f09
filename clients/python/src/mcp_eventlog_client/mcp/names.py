"""How an MCP session's SDK stream is named as a stream of the service.

A service stream id is `mcp.<scope>.<sdk stream, escaped>`: `<scope>` is the random key
of one MCP session in this process (see `mcp_eventlog_client.mcp.scope`), the SDK stream
is the request id (or `_GET_stream`) the SDK names the stream by. Escaping keeps the id
within the contract's alphabet and is reversible, so a resume answer's `stream_id` tells
which session and which SDK stream a token belongs to. The scheme is documented, for both
the Python and the TypeScript store, in `docs/stream-names.md`; both test suites read its
cases from `tests/fixtures/stream-convention.json`.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict

PREFIX = "mcp"
MAX_STREAM_ID = 256
_PLAIN = re.compile(rb"[A-Za-z0-9_.-]")
_ESCAPE = re.compile(r"~([0-9a-f]{2})")
_HASHED = "~h"


def _escape(sdk_stream: str) -> str:
    # `~` is in the contract's alphabet but not in `_PLAIN`, so it can mark an escape.
    return "".join(
        chr(byte) if _PLAIN.fullmatch(bytes([byte])) else f"~{byte:02x}"
        for byte in sdk_stream.encode()
    )


def _unescape(escaped: str) -> str | None:
    raw = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), escaped)
    try:
        return raw.encode("latin-1").decode()
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


class StreamNames:
    """Names SDK streams as service streams and reads the names back.

    An SDK stream id too long to fit escaped (a client may pick any JSON-RPC request id) is
    named by its SHA-256 instead; only this process can read such a name back, which is
    enough, since an MCP session lives in one process. At most `max_hashed` such names are
    remembered.
    """

    def __init__(self, max_hashed: int = 10_000) -> None:
        self._hashed: OrderedDict[str, str] = OrderedDict()
        self._max_hashed = max_hashed

    def name(self, scope: str, sdk_stream: str) -> str:
        """The service stream id of `sdk_stream` in the session `scope`."""
        head = f"{PREFIX}.{scope}."
        escaped = _escape(sdk_stream)
        if len(head) + len(escaped) <= MAX_STREAM_ID:
            return head + escaped
        digest = _HASHED + hashlib.sha256(sdk_stream.encode()).hexdigest()
        self._hashed[digest] = sdk_stream
        self._hashed.move_to_end(digest)
        while len(self._hashed) > self._max_hashed:
            self._hashed.popitem(last=False)
        return head + digest

    def parse(self, stream_id: str) -> tuple[str, str] | None:
        """`(scope, sdk_stream)` of a name made by `name`, or None if it is not one."""
        prefix, _, rest = stream_id.partition(".")
        scope, dot, escaped = rest.partition(".")
        if prefix != PREFIX or not scope or not dot:
            return None
        if escaped.startswith(_HASHED):
            sdk_stream = self._hashed.get(escaped)
            return None if sdk_stream is None else (scope, sdk_stream)
        sdk_stream = _unescape(escaped)
        return None if sdk_stream is None else (scope, sdk_stream)
