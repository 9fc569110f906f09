"""What every measurement sends and stores: one MCP progress notification (~200 bytes).

Shared by the load process, the seeders and the peers so that all of them move the same
bytes.
"""

from __future__ import annotations

import json
from typing import Any, Final

# A `notifications/progress` JSON-RPC message as an MCP server streams it during a tool call.
PROGRESS: Final = json.dumps(
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {
            "progressToken": "req-7f3a9c2e-tool-call",
            "progress": 42,
            "total": 100,
            "message": "indexing repository: 42 of 100 files scanned, 1873 symbols found",
        },
    },
    separators=(",", ":"),
)
EVENT_TYPE: Final = "message"
NBYTES: Final = len(PROGRESS.encode())


def append_body(batch: int) -> bytes:
    """The JSON body of an append of `batch` progress notifications (service-assigned seqs)."""
    events: list[dict[str, Any]] = [{"event": EVENT_TYPE, "data": PROGRESS}] * batch
    return json.dumps({"events": events}, separators=(",", ":")).encode()


def progress_call(rid: int, arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC `tools/call` of the `progress` tool, its progress token the request id."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "progress", "arguments": arguments, "_meta": {"progressToken": rid}},
    }
