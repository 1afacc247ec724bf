"""What a verb is: a contract (pure data every door derives from) plus a handler.

A verb's params are derived from its frozen request dataclass, so the contract cannot drift from
the decoder; its result is a frozen dataclass, so every door encodes the same fields. Building a
contract does no I/O: `till contracts` lists them on a machine with no store.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tillage.errors import SHARED_ERRORS, TillageError

# `typing` costs milliseconds at import, and `till` starts hundreds of times a session: the
# generic parameters below exist for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar

    Req = TypeVar("Req")
    Res = TypeVar("Res")
else:
    Any = object
    Req = Res = object

    class Generic:
        """Run-time stand-in for typing.Generic: subscription only informs the type checker."""

        def __class_getitem__(cls, _params: object) -> type:
            return cls


class Effect(enum.StrEnum):
    """What a verb does to the user's world; MCP annotations and confirmation derive from it."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    SETTINGS = "settings"


class Audience(enum.StrEnum):
    """Who a verb is for: agents are told about it, users see it, internal verbs are plumbing."""

    AGENT = "agent"
    USER = "user"
    INTERNAL = "internal"


class Scope(enum.StrEnum):
    """What the invoker resolves before the handler runs.

    `workspace`: an attached workspace (not attached is an answer: workspace.not_attached).
    `folder`: the folder named by --repo, attached or not (for attaching it).
    `none`: nothing; the verb needs no folder and no store.
    """

    WORKSPACE = "workspace"
    FOLDER = "folder"
    NONE = "none"


@dataclass(frozen=True)
class ParamSpec:
    """How a request field is documented and spelled on the command line."""

    doc: str
    positional: bool = False
    flag: str | None = None
    short: str | None = None
    metavar: str | None = None
    aliases: tuple[str, ...] = ()
    # The words after `--`: a command the verb runs (`till run NAME -- CMD ...`).
    remainder: bool = False
    # A flag whose value is a command line the verb runs (`merge --check CMD`); a remainder is
    # one too. A tool taking one is open-world (it can do anything a shell can).
    command: bool = False
    # A flag whose value may also come as the next positional word on the command line
    # (`till diff A B` is `till diff A --to B`, as git diff takes two).
    or_positional: bool = False

    @property
    def runs(self) -> bool:
        """Tells whether this param is a command line the verb runs."""
        return self.remainder or self.command


def param(
    doc: str,
    *,
    default: Any = dataclasses.MISSING,
    positional: bool = False,
    flag: str | None = None,
    short: str | None = None,
    metavar: str | None = None,
    aliases: tuple[str, ...] = (),
    remainder: bool = False,
    command: bool = False,
    or_positional: bool = False,
) -> Any:
    """Declares one request field with its documentation and its command-line spelling."""
    spec = ParamSpec(
        doc=doc,
        positional=positional,
        flag=flag,
        short=short,
        metavar=metavar,
        aliases=aliases,
        remainder=remainder,
        command=command,
        or_positional=or_positional,
    )
    if isinstance(default, (list, dict, set)):
        raise TypeError("request defaults must be immutable")
    return field(default=default, metadata={"tillage": spec})


@dataclass(frozen=True)
class Param:
    """One parameter as the contract shows it."""

    name: str
    type: str
    optional: bool
    doc: str
    default: Any
    spec: ParamSpec


_PRIMITIVES = {
    "str": "string",
    "int": "int",
    "bool": "bool",
    "bytes": "bytes",
    "float": "float",
    "None": "null",
    "Any": "any",
}


def _split_top(text: str, sep: str) -> list[str]:
    """Splits `text` on `sep` where it is not inside brackets."""
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i].strip())
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:].strip())
    return parts


def type_name(annotation: str) -> str:
    """Names an annotation (its source text) in the contract's small type vocabulary.

    Works on the text `from __future__ import annotations` leaves on each field, so listing
    contracts evaluates nothing and needs no `typing` at run time (start-up matters).
    """
    text = annotation.strip()
    alternatives = _split_top(text, "|")
    if len(alternatives) > 1:
        return " | ".join(type_name(a) for a in alternatives)
    if "[" in text and text.endswith("]"):
        head, inner = text[: text.index("[")], text[text.index("[") + 1 : -1]
        args = [a for a in _split_top(inner, ",") if a != "..."]
        if head in ("tuple", "list", "Sequence"):
            return f"list[{type_name(args[0])}]" if args else "list"
        if head in ("dict", "Mapping"):
            return "map"
        return head
    return _PRIMITIVES.get(text, text)


def dataclass_fields(cls: type) -> list[tuple[dataclasses.Field[Any], str]]:
    """Returns a dataclass's fields with their annotations' source text."""
    return [
        (f, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)))
        for f in dataclasses.fields(cls)
    ]


def params_of(request: type) -> list[Param]:
    """Derives a verb's params from its request dataclass (the decoder is the contract)."""
    params: list[Param] = []
    for f, annotation in dataclass_fields(request):
        spec = f.metadata.get("tillage")
        if not isinstance(spec, ParamSpec):
            raise TypeError(f"{request.__name__}.{f.name} must be declared with param()")
        has_default = f.default is not dataclasses.MISSING
        params.append(
            Param(
                name=f.name,
                type=type_name(annotation),
                optional=has_default,
                doc=spec.doc,
                default=f.default if has_default else None,
                spec=spec,
            )
        )
    return params


class ToolLimit:
    """The bounds of an integer param as a tool states and checks them: the schema, the
    description and the call share these numbers, so a model is told exactly what the code
    enforces (`maximum` None: the code sets none; `default` None: the param's own).

    A plain class, not a dataclass: it is defined at every `till` start-up, and a dataclass
    costs a millisecond to define."""

    __slots__ = ("default", "field", "maximum", "minimum")

    def __init__(
        self, field: str, default: int | None, maximum: int | None, minimum: int = 1
    ) -> None:
        self.field = field
        self.default = default
        self.maximum = maximum
        self.minimum = minimum


class ToolSpec:
    """How a verb is offered to a model as a tool (MCP, `tillage.agent`).

    Every agent-audience verb of workspace scope is a tool; this only says how it is spelled
    when that differs from the derived default (`workspace_` + the command, `-` as `_`).
    A destructive verb's tool takes `confirm` in place of `yes`/`dry_run`: without it the tool
    previews. `rename` maps a tool argument to the request field it fills; `hidden` fields are
    not offered; `fixed` fields are not offered either and always take the value given (a
    stream's `once`: one tool call cannot follow forever); `guide` is what a model should know
    beyond the contract's doc; `offered=False` keeps an agent-audience verb off the tool list
    (say why in `guide`). `doc` replaces the contract's doc and `docs` (field, text) a param's
    where those speak the command line's words (`--paths`, `till rewind`): a model is told
    of tool arguments and tools only. `required` fields are required of a tool call though
    optional on the command line (a `fixed` field makes them needed: a stream read once needs
    the point to read after). A plain class for the same reason as ToolLimit.
    """

    __slots__ = (
        "doc",
        "docs",
        "fixed",
        "guide",
        "hidden",
        "idempotent",
        "limits",
        "name",
        "offered",
        "rename",
        "required",
    )

    def __init__(
        self,
        name: str | None = None,
        *,
        rename: tuple[tuple[str, str], ...] = (),
        hidden: tuple[str, ...] = (),
        limits: tuple[ToolLimit, ...] = (),
        guide: str = "",
        idempotent: bool | None = None,
        offered: bool = True,
        fixed: tuple[tuple[str, Any], ...] = (),
        doc: str | None = None,
        docs: tuple[tuple[str, str], ...] = (),
        required: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.doc = doc
        self.docs = docs
        self.required = required
        self.fixed = fixed
        self.rename = rename
        self.hidden = hidden
        self.limits = limits
        self.guide = guide
        self.idempotent = idempotent
        self.offered = offered


class StdinValue:
    """A request field (`str | bytes`) a command line fills with stdin's bytes, read to its
    end, when stdin is not a terminal and neither that field nor any of `unless` was given
    (`till coord write KEY < notes.md`). At most `limit` + 1 bytes are read, so the handler
    refuses a value over `limit` by its size rather than keep it cut; an empty stdin gives
    nothing. A plain class for the same reason as ToolLimit."""

    __slots__ = ("field", "limit", "unless")

    def __init__(self, field: str, limit: int, unless: tuple[str, ...] = ()) -> None:
        self.field = field
        self.limit = limit
        self.unless = unless


@dataclass(frozen=True)
class Contract(Generic[Req, Res]):
    """A verb as every door sees it; pure data."""

    name: str
    since: int
    scope: Scope
    audience: Audience
    effect: Effect
    request: type[Req]
    result: type[Res]
    doc: str
    cli: str
    errors: tuple[type[TillageError], ...] = ()
    event: str | None = None
    # Destructive verbs say when a request needs confirmation and how to preview it instead;
    # the invoker enforces both, so no host can forget to (CONTRACT: destructive operations).
    needs_confirmation: Callable[[Req], bool] | None = None
    # What a confirmed request does, for the words that ask for --yes ("changes files").
    confirms: str = "changes files"
    # Checks a request's own arguments (an ID resolves, a path parses) before confirmation is
    # asked for, so a bad argument is answered as such, never as "needs --yes".
    validate: Callable[[Any, Req], None] | None = None
    preview: Callable[[Req], Req] | None = None
    confirmed: Callable[[Req], Req] | None = None
    # A verb whose human output is raw content on stdout (`cat`) says how to get it.
    raw_output: Callable[[Res], bytes | str | Iterable[bytes]] | None = None
    # A verb that also takes a document on stdin (a harness's hook payload) names the request
    # field it goes to; the host reads stdin only when it is not a terminal, with a deadline.
    stdin_param: str | None = None
    # A verb whose value may come on stdin, whole and as bytes (see StdinValue).
    stdin_value: StdinValue | None = None
    # What a door that is a process of its own runs once the reply is printed (settings,
    # request, result): `watch --foreground` becomes the watcher. Other doors never call it.
    after_reply: Callable[[Any, Req, Res], None] | None = None
    # How a model is offered this verb as a tool (see ToolSpec); None: the derived default.
    tool: ToolSpec | None = None
    # The command it takes (ParamSpec.runs) runs in the live folder, not in a copy: its tool
    # is destructive (the command may delete anything there), whatever the verb's effect.
    live_commands: bool = False
    # The door a command line hands its process to after parsing (`till mcp` serves MCP on
    # stdio): the host's name. The verb's handler describes what that door would serve.
    serves: str | None = None
    # A success of a verb that is not `read` is one operation in the operation log
    # (verbs/oplog_record.py); False for a verb that records its own (`till undo`) or changes
    # nothing a person would undo (a server's session, a remote's check).
    records_operation: bool = True
    # What a crash interrupted of this verb, finished by the next command of any kind (ctx:
    # the resolved workspace); the invoker calls it when the store's intents hold one of the
    # verb's (invoke.PENDING_INTENTS). Found through the registry: the invoker imports no verb.
    finish_pending: Callable[[Any], None] | None = None

    def tool_name(self) -> str | None:
        """The tool this verb is offered as, or None when it is not one (see ToolSpec)."""
        spec = self.tool or ToolSpec()
        if self.audience is not Audience.AGENT or self.scope is not Scope.WORKSPACE:
            return None
        if not spec.offered:
            return None
        return spec.name or "workspace_" + self.cli.replace("-", "_").replace(" ", "_")

    def params(self) -> list[Param]:
        """Returns the params derived from the request dataclass."""
        return params_of(self.request)

    def describe(self) -> dict[str, Any]:
        """Returns the contract as the JSON `till contracts` prints."""
        # Codes high to low; errors sharing a code (a shared code and its named cases) by name,
        # so the listing does not follow the order classes happen to be imported in.
        errors = sorted({*self.errors, *SHARED_ERRORS}, key=lambda e: (-e.code, e.name))
        return {
            "verb": self.name,
            "since": self.since,
            "scope": self.scope.value,
            "audience": self.audience.value,
            "effect": self.effect.value,
            "command": self.cli,
            "params": [
                {"name": p.name, "type": p.type, "optional": p.optional, "doc": p.doc}
                for p in self.params()
            ],
            "result": {
                "type": self.result.__name__,
                "fields": {f.name: type_name(t) for f, t in dataclass_fields(self.result)},
            },
            "errors": [{"code": e.code, "name": e.name} for e in errors],
            "event": self.event,
            "confirmation": self.needs_confirmation is not None,
            "tool": self.tool_name(),
            "doc": self.doc,
        }


def agent_contract(
    name: str,
    cli: str,
    request: type,
    result: type,
    effect: Effect,
    doc: str,
    **fields: Any,
) -> Contract[Any, Any]:
    """The contract of a verb an agent calls on an attached workspace (the common case):
    since 1, workspace scope, agent audience; `fields` are the rest (errors, event, tool...)."""
    return Contract(
        name=name,
        since=1,
        scope=Scope.WORKSPACE,
        audience=Audience.AGENT,
        effect=effect,
        request=request,
        result=result,
        cli=cli,
        doc=doc,
        **fields,
    )


@dataclass(frozen=True)
class Verb(Generic[Req, Res]):
    """A contract and the handler that fulfils it."""

    contract: Contract[Req, Res]
    handler: Callable[[Any, Req], Res]


def decode_request(contract: Contract[Req, Any], values: Mapping[str, Any]) -> Req:
    """Builds a request from wire values, refusing unknown or missing params by name."""
    from tillage.errors import InvalidArgumentError

    known = {p.name: p for p in contract.params()}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise InvalidArgumentError(f"{contract.name}: unknown param {unknown[0]!r}")
    missing = [n for n, p in known.items() if not p.optional and n not in values]
    if missing:
        raise InvalidArgumentError(f"{contract.name}: missing param {missing[0]!r}")
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return contract.request(**converted)
