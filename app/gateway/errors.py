"""The gateway's own errors: one base under the service's tree (`app.errors`).

    EventLogError
    ├── UpstreamError (app.errors)     the upstream MCP server failed
    │   ├── SseTooLarge (sse)          an upstream's SSE event or line over the limit
    │   └── Unanswered (task_calls)    a response without the answer to its request
    └── GatewayError                   a relay or a task call stops short
        ├── RelayCut (relay)           the client cannot be sent the rest (`reason`)
        ├── _Unreadable (relay)        the log could not be read back for a while
        └── _Stopped (task_worker)     the task settled without this worker

Each is caught inside the gateway, where it decides what the client gets (a `-32010` or
`-32011` error, the end of a response); none leaves as a problem. Each still has the code
of the table's row it would be answered by if one did.
"""

from __future__ import annotations

from app.errors import EventLogError


class GatewayError(EventLogError):
    """A relay or a task call of the gateway stops short."""
