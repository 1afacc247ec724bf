"""The MCP door: the agent-audience verbs as tools, over stdio, with the official SDK."""
