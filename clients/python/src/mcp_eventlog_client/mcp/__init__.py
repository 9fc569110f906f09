"""MCP integration: an `EventStore` for the official Python SDK.

Install with `pip install "mcp-eventlog-client[mcp]"` (from a checkout:
`pip install "./clients/python[mcp]"`); see `EventLogEventStore` (2025-03-26 … 2025-11-25
sessions: resumable streams), `EventLogSubscriptionBus` (2026-07-28: server events
across replicas) and `EventLogTasks` (2026-07-28: MCP's tasks extension, the task record
in the log).
"""

from mcp_eventlog_client.mcp.bus import EventLogSubscriptionBus
from mcp_eventlog_client.mcp.refusal import RESUME_REFUSED
from mcp_eventlog_client.mcp.scope import (
    SessionScopeMiddleware,
    SessionScopes,
    current_scope,
    session_scope,
)
from mcp_eventlog_client.mcp.store import EventLogEventStore
from mcp_eventlog_client.mcp.tasks import (
    EventLogTasks,
    EventLogTaskStore,
    PollTasks,
    current_task_run,
)

__all__ = [
    "RESUME_REFUSED",
    "EventLogEventStore",
    "EventLogSubscriptionBus",
    "EventLogTaskStore",
    "EventLogTasks",
    "PollTasks",
    "SessionScopeMiddleware",
    "SessionScopes",
    "current_scope",
    "current_task_run",
    "session_scope",
]
