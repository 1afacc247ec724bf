"""Which verbs are tools, and how a model is offered each: one derivation for the MCP server,
`tillage.agent` and the tools' text.

A tool is an agent-audience verb of workspace scope, spelled for a model: its name, a
description that says when to call it and what the numbers are, a JSON schema derived from the
request dataclass, and annotations derived from the contract: its effect, and the commands it
runs (any command is open-world; one run in the live folder can delete anything there, so it is
destructive). A destructive verb's tool previews unless it is called with `confirm: true`.
Calling them is tools.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tillage.verbs.contract import Audience, Effect, Scope, ToolLimit, ToolSpec, Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# The tools a model reaches for first, in this order; the rest follow in registry order.
FIRST_TOOLS = ("workspace_snapshots", "workspace_restore", "workspace_fork", "workspace_merge")
CONFIRM = "confirm"
# The request fields a destructive verb's tool replaces with `confirm`.
CONFIRM_FIELDS = ("yes", "dry_run")

_JSON_TYPES = {"string": "string", "int": "integer", "bool": "boolean", "float": "number"}


@dataclass(frozen=True)
class ToolArg:
    """One argument of a tool and the request field it fills."""

    name: str
    field: str
    type: str  # the contract's type vocabulary (contract.type_name)
    required: bool
    doc: str
    default: Any
    limit: ToolLimit | None
    command: bool  # the words of a command: one string for a model, run through sh -c


@dataclass(frozen=True)
class ToolDef:
    """A verb as a model is offered it."""

    name: str
    verb: Verb[Any, Any]
    description: str
    args: tuple[ToolArg, ...]
    read_only: bool
    destructive: bool
    idempotent: bool
    # Takes `confirm` in place of `yes`/`dry_run`: previews unless it is true.
    confirms: bool
    # Request fields the tool always sets, never offered (ToolSpec.fixed).
    fixed: tuple[tuple[str, Any], ...] = ()
    # Runs a command it is given (a shell can reach anything): MCP's openWorldHint.
    open_world: bool = False

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments (no other property is accepted)."""
        properties: dict[str, Any] = {}
        for arg in self.args:
            properties[arg.name] = _arg_schema(arg)
        if self.confirms:
            properties[CONFIRM] = {
                "type": "boolean",
                "default": False,
                "description": "true applies the change; false (the default) only previews "
                "it and changes nothing",
            }
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        required = [a.name for a in self.args if a.required]
        if required:
            schema["required"] = required
        return schema

    def annotations(self) -> dict[str, bool]:
        """MCP's tool annotations, from the contract (its effect and the commands it runs)."""
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


def _arg_schema(arg: ToolArg) -> dict[str, Any]:
    if arg.command:
        schema: dict[str, Any] = {"type": "string"}
    else:
        kinds = [k for k in arg.type.split(" | ") if k != "null"]
        kind = kinds[0] if kinds else "string"
        if kind.startswith("list["):
            inner = _JSON_TYPES.get(kind[5:-1], "string")
            schema = {"type": "array", "items": {"type": inner}}
        else:
            schema = {"type": _JSON_TYPES.get(kind, "string")}
    schema["description"] = arg.doc
    if arg.limit is not None:
        schema["minimum"] = arg.limit.minimum
        if arg.limit.maximum is not None:
            schema["maximum"] = arg.limit.maximum
        if arg.default is not None:
            schema["default"] = arg.default
    elif not arg.required and arg.default not in (None, ()):
        schema["default"] = arg.default
    return schema


def _derive(verb: Verb[Any, Any]) -> ToolDef | None:
    contract = verb.contract
    name = contract.tool_name()
    if name is None:
        return None
    spec = contract.tool or ToolSpec()
    renamed = {field: arg for arg, field in spec.rename}
    limits = {limit.field: limit for limit in spec.limits}
    docs = dict(spec.docs)
    confirms = contract.needs_confirmation is not None
    hidden = set(spec.hidden) | {f for f, _ in spec.fixed}
    hidden |= set(CONFIRM_FIELDS) if confirms else set()
    args = []
    for prm in contract.params():
        if prm.name in hidden:
            continue
        limit = limits.get(prm.name)
        args.append(
            ToolArg(
                name=renamed.get(prm.name, prm.name),
                field=prm.name,
                type=prm.type,
                required=not prm.optional or prm.name in spec.required,
                doc=docs.get(prm.name, prm.doc),
                default=prm.default if limit is None or limit.default is None else limit.default,
                limit=limit,
                command=prm.spec.remainder,
            )
        )
    effect = contract.effect
    open_world = any(p.spec.runs for p in contract.params())
    idempotent = spec.idempotent if spec.idempotent is not None else effect is Effect.READ
    return ToolDef(
        name=name,
        verb=verb,
        description=_description(spec.doc or contract.doc, spec, tuple(args), confirms),
        args=tuple(args),
        read_only=effect is Effect.READ and not open_world,
        destructive=effect is Effect.DESTRUCTIVE or (open_world and contract.live_commands),
        idempotent=idempotent and not open_world,
        confirms=confirms,
        fixed=spec.fixed,
        open_world=open_world,
    )


def _bounds(arg: ToolArg) -> str:
    """`n`: default 1, from 1 to 64. (the numbers the schema states and the call checks)."""
    limit = arg.limit
    assert limit is not None
    words = [] if arg.default is None else [f"default {arg.default}"]
    if limit.maximum is None:
        words.append(f"at least {limit.minimum}")
    elif limit.minimum == 1:
        words.append(f"at most {limit.maximum}")
    else:
        words.append(f"from {limit.minimum} to {limit.maximum}")
    return f"`{arg.name}`: {', '.join(words)}."


def _description(doc: str, spec: ToolSpec, args: tuple[ToolArg, ...], confirms: bool) -> str:
    parts = [doc.strip()]
    if spec.guide:
        parts.append(spec.guide.strip())
    for arg in args:
        if arg.limit is not None:
            parts.append(_bounds(arg))
    if confirms:
        parts.append(
            "Without `confirm: true` this only previews what would change and changes nothing; "
            "the present state is sealed before anything is applied, so it can be undone."
        )
    return " ".join(parts)


@cache
def tool_defs() -> tuple[ToolDef, ...]:
    """Every tool, FIRST_TOOLS first, then the rest in registry order."""
    from tillage.verbs.registry import all_verbs

    found = [d for d in (_derive(v) for v in all_verbs()) if d is not None]
    first = [d for name in FIRST_TOOLS for d in found if d.name == name]
    return (*first, *(d for d in found if d.name not in FIRST_TOOLS))


def is_tool(verb: Verb[Any, Any]) -> bool:
    """Tells whether a verb is offered to models as a tool."""
    c = verb.contract
    return c.audience is Audience.AGENT and c.scope is Scope.WORKSPACE and c.tool_name() is not None


def tool_for_command(cli: str) -> str | None:
    """The tool offering the command `cli` (`timeline` → workspace_snapshots), or None."""
    for d in tool_defs():
        if d.verb.contract.cli == cli:
            return d.name
    return None


def tool_def(name: str) -> ToolDef | None:
    """The tool called `name`, or None."""
    for d in tool_defs():
        if d.name == name:
            return d
    return None
