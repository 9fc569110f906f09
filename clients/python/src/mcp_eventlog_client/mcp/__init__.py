"""MCP integration: an `EventStore` for the official Python SDK.

Install with `pip install "mcp-eventlog-client[mcp]"` (from a checkout:
`pip install "./clients/python[mcp]"`); see `EventLogEventStore`.
"""

from mcp_eventlog_client.mcp.refusal import RESUME_REFUSED
from mcp_eventlog_client.mcp.scope import (
    SessionScopeMiddleware,
    SessionScopes,
    current_scope,
    session_scope,
)
from mcp_eventlog_client.mcp.store import EventLogEventStore

__all__ = [
    "RESUME_REFUSED",
    "EventLogEventStore",
    "SessionScopeMiddleware",
    "SessionScopes",
    "current_scope",
    "session_scope",
]
