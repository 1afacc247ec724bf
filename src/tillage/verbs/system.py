"""Verbs about tillage itself: its contracts, its version and the agent guide; no store needed."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


PROTOCOL = 1
VERSION = "0.1.0"


@dataclass(frozen=True)
class ContractsRequest:
    pass


@dataclass(frozen=True)
class ContractsResult:
    verbs: tuple[dict[str, Any], ...]


def list_contracts(_ctx: Any, _req: ContractsRequest) -> ContractsResult:
    from tillage.verbs.registry import all_verbs

    return ContractsResult(verbs=tuple(v.contract.describe() for v in all_verbs()))


@dataclass(frozen=True)
class VersionRequest:
    pass


@dataclass(frozen=True)
class VersionResult:
    version: str
    protocol: int
    format: int
    python: str


def version(_ctx: Any, _req: VersionRequest) -> VersionResult:
    import platform

    from tillage.core.format import FORMAT_VERSION

    return VersionResult(
        version=VERSION,
        protocol=PROTOCOL,
        format=FORMAT_VERSION,
        python=platform.python_version(),
    )


@dataclass(frozen=True)
class AgentsMdRequest:
    pass


@dataclass(frozen=True)
class AgentsMdResult:
    markdown: str


def agents_md(_ctx: Any, _req: AgentsMdRequest) -> AgentsMdResult:
    from tillage.verbs.docs import render_agents_md
    from tillage.verbs.registry import all_verbs

    return AgentsMdResult(markdown=render_agents_md(all_verbs()))


@dataclass(frozen=True)
class McpRequest:
    list_tools: bool = param(
        "print the tools it would offer here (name, description, schema, annotations) and "
        "exit, instead of serving",
        default=False,
        flag="--list",
    )


@dataclass(frozen=True)
class McpToolInfo:
    name: str
    verb: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, bool]


@dataclass(frozen=True)
class McpResult:
    folder: str
    attached: bool
    # The tools offered here now: none on a folder that is not attached.
    tools: tuple[McpToolInfo, ...]
    # True: this process goes on to serve MCP on stdio (nothing is printed).
    serving: bool
    # With --list on a folder that is not attached: why no tool is offered, and the command
    # that attaches it (null when attached, or when serving).
    reason: str | None = None
    next: str | None = None


def mcp(ctx: Any, req: McpRequest) -> McpResult:
    if not req.list_tools:
        return McpResult(folder=str(ctx.settings.folder), attached=False, tools=(), serving=True)
    from tillage.verbs.tools import Toolbelt

    belt = Toolbelt(ctx.settings)
    try:
        offered = belt.tools()
    finally:
        belt.close()
    reason, next_step = (None, None) if offered else _not_attached(ctx.settings)
    return McpResult(
        folder=str(ctx.settings.folder),
        attached=bool(offered),
        reason=reason,
        next=next_step,
        tools=tuple(
            McpToolInfo(
                d.name, d.verb.contract.name, d.description, d.input_schema(), d.annotations()
            )
            for d in offered
        ),
        serving=False,
    )


def _not_attached(settings: Any) -> tuple[str | None, str | None]:
    """Why the folder offers no tools, and what attaches it: the error a workspace command
    would answer here (a lookup only: nothing is attached, no pointer put back)."""
    from tillage.errors import TillageError
    from tillage.workspace.attach import require_workspace

    try:
        require_workspace(settings.home, settings.folder, settings.user_home, restore_pointer=False)
    except TillageError as err:
        return err.message, err.next
    except OSError as exc:
        return f"{settings.folder} cannot be read: {exc.strerror or exc}", None
    return None, None  # attached since the tools were listed


def _markdown(result: AgentsMdResult) -> str:
    return result.markdown


VERBS = (
    Verb(
        Contract(
            name="system.contracts",
            since=1,
            scope=Scope.NONE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=ContractsRequest,
            result=ContractsResult,
            cli="contracts",
            doc="Every verb's contract as JSON: params, result fields, errors, effect, audience.",
        ),
        list_contracts,
    ),
    Verb(
        Contract(
            name="system.version",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.READ,
            request=VersionRequest,
            result=VersionResult,
            cli="version",
            doc="The tillage version, protocol and storage format versions.",
        ),
        version,
    ),
    Verb(
        Contract(
            name="system.agents_md",
            since=1,
            scope=Scope.NONE,
            audience=Audience.INTERNAL,
            effect=Effect.READ,
            request=AgentsMdRequest,
            result=AgentsMdResult,
            cli="agents-md",
            doc="The agent guide (docs/agents.md), generated from the registry.",
            raw_output=_markdown,
        ),
        agents_md,
    ),
    Verb(
        Contract(
            name="system.mcp",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.USER,
            effect=Effect.READ,
            request=McpRequest,
            result=McpResult,
            cli="mcp",
            serves="mcp",
            doc="Serve this folder's tools to an agent over MCP on stdio (a harness launches "
            "it: `till --repo DIR mcp`). They are the agent-audience verbs, derived from the "
            "registry; a folder that is not attached is offered none of them, and the list "
            "is announced again (`notifications/tools/list_changed`) when `till watch` attaches "
            "it or `till forget` forgets it. A cancelled call (`notifications/cancelled`) stops "
            "its command's whole process group and still seals what it did; SIGTERM, SIGINT, "
            "SIGHUP or the end of stdin stop the server at once, the commands of its running "
            "calls stopped and sealed the same way and every call answered before it exits.",
        ),
        mcp,
    ),
)
