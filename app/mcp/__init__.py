"""MCP integration: an `EventStore` for the official Python SDK.

Install with `pip install 'mcp-eventlog[mcp]'`; see `EventLogEventStore`.
"""

from app.mcp.scope import SessionScopeMiddleware, SessionScopes, current_scope, session_scope
from app.mcp.store import RESUME_REFUSED, EventLogEventStore

__all__ = [
    "RESUME_REFUSED",
    "EventLogEventStore",
    "SessionScopeMiddleware",
    "SessionScopes",
    "current_scope",
    "session_scope",
]
