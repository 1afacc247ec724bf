"""`till mcp`: an MCP server on stdio, its tools derived from the verb registry.

The tool list is asked for, not fixed: a folder that is not attached gets no workspace tools
(a capability that cannot work is absent, not broken), and one attached while the server runs
gets them on the client's next `tools/list`. Calls run on worker threads (up to
CONCURRENT_CALLS at once) through verbs/tools.py's Toolbelt, which keeps a store open per
thread, so a call pays no start-up and a long command in a fork holds up no other call;
every failure is a tool result with `isError` and the error's code, name and next step.

The SDK (and pydantic, starlette, ...) is imported here only: `till` itself never pays for it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from tillage.verbs.invoke import Settings
    from tillage.verbs.tools import Toolbelt

SERVER_NAME = "tillage"
# Tool calls served at once (a client may send several; writers meet at the workspace's locks).
CONCURRENT_CALLS = 4


def instructions(folder: str) -> str:
    """What the server tells a model about itself, once, at the handshake."""
    return (
        f"tillage keeps restore points of the whole folder {folder} (every file, ignored ones, "
        ".env and databases included). workspace_snapshots lists them; workspace_restore puts "
        "files back (it previews unless confirm is true, and seals the present first so a "
        "restore can be undone); workspace_fork runs a risky command in a copy of the folder; "
        "workspace_merge lands a fork's changes only if a check passes. These move files on "
        "disk: they are not a rewind of the conversation. When no tools are listed, the folder "
        "is not attached (a person runs `till watch` there)."
    )


def build_server(settings: Settings) -> tuple[Server[Any], Toolbelt]:
    """The MCP server for `settings.folder`, and the toolbelt it calls (close it after)."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from tillage.verbs.system import VERSION
    from tillage.verbs.tools import Toolbelt

    # Commands keep the host's environment; their output is captured, never copied to stdout,
    # which is the protocol's.
    quiet = dataclasses.replace(settings.launch, output=None) if settings.launch else None
    belt = Toolbelt(dataclasses.replace(settings, own_process=False, launch=quiet))
    workers = anyio.CapacityLimiter(CONCURRENT_CALLS)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        offered = await anyio.to_thread.run_sync(belt.tools, limiter=workers)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=d.name,
                    description=d.description,
                    input_schema=d.input_schema(),
                    annotations=types.ToolAnnotations.model_validate(d.annotations()),
                )
                for d in offered
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        def run() -> Any:
            return belt.call(params.name, params.arguments or {})

        result = await anyio.to_thread.run_sync(run, limiter=workers)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=result.structured,
            is_error=result.is_error,
        )

    server: Server[Any] = Server(
        SERVER_NAME,
        version=VERSION,
        instructions=instructions(str(settings.folder)),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    return server, belt


def serve_stdio(settings: Settings) -> int:
    """Serves MCP on this process's stdin/stdout until the client closes stdin."""
    import os
    import sys

    import anyio
    from mcp.server.stdio import stdio_server

    if os.isatty(0):
        sys.stderr.write(
            "till mcp speaks MCP (JSON-RPC) on stdin/stdout for an agent harness; it is not "
            "interactive. Register it with your agent, e.g.\n"
            f"  claude mcp add tillage -- till --repo {settings.folder} mcp\n"
            "Serving until stdin closes (Ctrl-D) or Ctrl-C.\n"
        )
    server, belt = build_server(settings)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        belt.close()
    return 0
