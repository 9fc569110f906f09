"""A typed async client for the event-log service.

```python
from mcp_eventlog_client import EventLogClient, NewEvent

async with EventLogClient("http://127.0.0.1:8080") as log:
    generation = await log.open_generation("sess-1.req-7")
    await log.append(generation.token, [NewEvent("hello")], first_seq=1)
    answer = await log.resume(f"{generation.token}:0")
```
"""

from mcp_eventlog_client.connection import RetryPolicy, ServiceConnection
from mcp_eventlog_client.errors import (
    BatchTooLarge,
    BeyondTail,
    BodyTimeout,
    BodyTooLarge,
    DatabaseUnavailable,
    EventLogError,
    EventTooLarge,
    Evicted,
    Expired,
    Forbidden,
    InternalError,
    InvalidJson,
    NotFound,
    SeqConflict,
    SeqGap,
    ServiceUnreachable,
    StorageFailed,
    Superseded,
    TerminalGeneration,
    Unauthorized,
    UnknownGeneration,
    UnknownStream,
    UnsupportedMediaType,
    ValidationFailed,
    error_for,
)
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
    "AppendResult",
    "BatchTooLarge",
    "BeyondTail",
    "BodyTimeout",
    "BodyTooLarge",
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
    "NewEvent",
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
    "Unauthorized",
    "UnknownGeneration",
    "UnknownStream",
    "UnsupportedMediaType",
    "ValidationFailed",
    "Verdict",
    "error_for",
]
