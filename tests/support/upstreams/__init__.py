"""Real MCP servers the gateway stands in front of, with no event store of their own."""
