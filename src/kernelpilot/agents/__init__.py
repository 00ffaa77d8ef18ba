"""What coding agents use to drive kernelpilot: the MCP server (:mod:`kernelpilot.agents.mcp_server`)."""
