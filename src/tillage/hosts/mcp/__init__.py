"""The MCP door: the agent-audience verbs as tools, over stdio (protocol.py, server.py)."""
