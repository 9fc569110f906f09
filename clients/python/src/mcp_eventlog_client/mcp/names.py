"""How an MCP session's SDK stream is named as a stream of the service.

The convention's names (`mcp_eventlog_client.convention`): `mcp.<scope>.<sdk stream,
escaped>`, where `<scope>` is the random key of one MCP session in this process (see
`mcp_eventlog_client.mcp.scope`).
"""

from mcp_eventlog_client.convention import MAX_STREAM_ID, PREFIX, StreamNames

__all__ = ["MAX_STREAM_ID", "PREFIX", "StreamNames"]
