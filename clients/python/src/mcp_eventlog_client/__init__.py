"""A typed async client for the event-log service.

```python
from mcp_eventlog_client import EventLogClient, NewEvent

async with EventLogClient("http://127.0.0.1:8080") as log:
    generation = await log.open_generation("sess-1.req-7")
    await log.append(generation.token, [NewEvent("hello")], first_seq=1)
    answer = await log.resume(f"{generation.token}:0")
    async for item in log.follow("sess-1.req-7"):  # LiveEvent, LiveReset, LiveEnd
        ...
```
"""

from mcp_eventlog_client.connection import RetryPolicy, ServiceConnection, default_transport
from mcp_eventlog_client.errors import (
    AmbiguousStream,
    BatchTooLarge,
    BeyondTail,
    BodyTimeout,
    BodyTooLarge,
    CrossStream,
    DatabaseUnavailable,
    EventLogError,
    EventTooLarge,
    Evicted,
    Expired,
    Forbidden,
    InternalError,
    InvalidJson,
    MalformedId,
    NotAcceptable,
    NotFound,
    SeqConflict,
    SeqGap,
    ServiceUnreachable,
    StorageFailed,
    Superseded,
    TerminalGeneration,
    TooManyReaders,
    Unauthorized,
    UnknownGeneration,
    UnknownStream,
    UnsupportedMediaType,
    ValidationFailed,
    error_for,
)
from mcp_eventlog_client.live import LiveEnd, LiveEvent, LiveItem, LiveReset
from mcp_eventlog_client.models import (
    AppendResult,
    EventPage,
    Generation,
    NewEvent,
    ResumeAnswer,
    StoredEvent,
    StreamView,
)
from mcp_eventlog_client.verdict import Verdict
from mcp_eventlog_client.writer import EventLogClient

__all__ = [
    "AmbiguousStream",
    "AppendResult",
    "BatchTooLarge",
    "BeyondTail",
    "BodyTimeout",
    "BodyTooLarge",
    "CrossStream",
    "DatabaseUnavailable",
    "EventLogClient",
    "EventLogError",
    "EventPage",
    "EventTooLarge",
    "Evicted",
    "Expired",
    "Forbidden",
    "Generation",
    "InternalError",
    "InvalidJson",
    "LiveEnd",
    "LiveEvent",
    "LiveItem",
    "LiveReset",
    "MalformedId",
    "NewEvent",
    "NotAcceptable",
    "NotFound",
    "ResumeAnswer",
    "RetryPolicy",
    "SeqConflict",
    "SeqGap",
    "ServiceConnection",
    "ServiceUnreachable",
    "StorageFailed",
    "StoredEvent",
    "StreamView",
    "Superseded",
    "TerminalGeneration",
    "TooManyReaders",
    "Unauthorized",
    "UnknownGeneration",
    "UnknownStream",
    "UnsupportedMediaType",
    "ValidationFailed",
    "Verdict",
    "default_transport",
    "error_for",
]
