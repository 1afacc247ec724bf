"""The MCP wire, as `till mcp` speaks it: JSON-RPC 2.0 messages, one per line, the handshake-era
protocol (`initialize`), and the shapes of its answers. Pure: no I/O, nothing imported that
serving does not need (the SDK costs more than half a second to import; this costs nothing).

The official SDK clients (Python, TypeScript) and Claude Code are the judges of this module:
tests/agents/ drive the real process with both SDKs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Handshake-era revisions, oldest to newest; the newest is offered to a client asking for one
# we do not know (the client then decides). A `server/discover` probe (the stateless era) is
# answered "method not found", which every SDK client reads as "use initialize".
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_STOPPING = -32000  # JSON-RPC's server-error range: asked after a stop began

LIST_CHANGED = "notifications/tools/list_changed"


def negotiate(requested: object) -> str:
    """The protocol revision answered to a client that asked for `requested`: that one when we
    speak it, else our newest."""
    return (
        requested
        if isinstance(requested, str) and requested in PROTOCOL_VERSIONS
        else (PROTOCOL_VERSIONS[-1])
    )


def initialize_result(
    requested: object, *, name: str, version: str, instructions: str
) -> dict[str, Any]:
    """What `initialize` answers: the revision, the tools capability (whose list changes as the
    folder is attached or forgotten), who we are and what we tell the model."""
    return {
        "protocolVersion": negotiate(requested),
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": name, "version": version},
        "instructions": instructions,
    }


def response(request_id: Any, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": dict(result)}


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def encode(message: Mapping[str, Any]) -> bytes:
    """One message as one line (JSON has no raw newline in it)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def request_key(request_id: Any) -> str:
    """A request id as a dictionary key that tells 1 from "1" (a cancel names it exactly)."""
    return json.dumps(request_id)


def tool_entry(tool: Any) -> dict[str, Any]:
    """A ToolDef (verbs/tool_defs.py) as `tools/list` lists it."""
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema(),
        "annotations": tool.annotations(),
    }


def call_result(result: Any) -> dict[str, Any]:
    """A ToolResult (verbs/tools.py) as `tools/call` answers it: the text for the model, the
    structured result as a model reads it (capped like the text: some clients hand the model
    only this), and whether it failed."""
    answer: dict[str, Any] = {
        "content": [{"type": "text", "text": result.text}],
        "isError": result.is_error,
    }
    if result.structured is not None:
        answer["structuredContent"] = result.structured
    return answer


class BadMessageError(Exception):
    """A line that is not a JSON-RPC message we can answer: its error code and the id to
    answer it under (None when the line gave none)."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


def parse(line: bytes) -> dict[str, Any]:
    """One line as a message (a request, a notification or a response); raises BadMessageError."""
    try:
        message = json.loads(line)
    except ValueError:
        raise BadMessageError(PARSE_ERROR, "Parse error: not JSON") from None
    if not isinstance(message, dict):
        raise BadMessageError(
            INVALID_REQUEST, "Invalid Request: one JSON object per line (no batches)"
        )
    if message.get("jsonrpc") != "2.0":
        raise BadMessageError(
            INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', _id(message)
        )
    if "method" in message and not isinstance(message["method"], str):
        raise BadMessageError(
            INVALID_REQUEST, "Invalid Request: method must be a string", _id(message)
        )
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        raise BadMessageError(INVALID_PARAMS, "Invalid params: must be an object", _id(message))
    return message


def _id(message: Mapping[str, Any]) -> Any:
    value = message.get("id")
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None
