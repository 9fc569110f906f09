"""mcp-eventlog: durable stream generations and a safe resume verdict for MCP servers."""

__version__ = "0.3.0"
