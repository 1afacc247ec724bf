"""Calling verbs as tools: one door for the MCP server and `tillage.agent` (the tools
themselves are derived in tool_defs.py).

Calling one goes through the same `invoke` as every other door, so the safety rules and errors
are the contract's. A `Toolbelt` keeps the store open between calls (a model makes many),
serialises them, and answers every failure as a result (`is_error`) with the error's code, name
and next step: never an exception, never a traceback.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from tillage.errors import InternalError, InvalidArgumentError, TillageError
from tillage.verbs.tool_defs import (
    CONFIRM,
    ToolArg,
    ToolDef,
    tool_def,
    tool_defs,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from tillage.platform.commands import Cancelled, CancelToken
    from tillage.verbs.invoke import Settings


@dataclass(frozen=True)
class ToolResult:
    """What a tool call says: `text` for the model (capped), `is_error`, the machine document
    (`--json`'s: the result, or `{"error": envelope}`) for the harness, whole, and
    `structured`, that document as a model reads it (MCP `structuredContent`: cut to the
    text's cap, in its words: tool_shape.py; None when even cut it would not fit)."""

    text: str
    is_error: bool
    document: dict[str, Any]
    structured: dict[str, Any] | None = None


def decode_args(tool: ToolDef, args: Mapping[str, Any]) -> tuple[Any, bool]:
    """Turns a model's arguments into the verb's request and `confirm`; a wrong name or type
    is invalid_argument naming it (the schema says the same, but a model may not read it)."""
    from tillage.verbs.contract import decode_request

    if not isinstance(args, dict):
        raise InvalidArgumentError(f"{tool.name}: arguments must be an object")
    known = {a.name: a for a in tool.args}
    allowed = sorted([*known, CONFIRM] if tool.confirms else known)
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise InvalidArgumentError(
            f"{tool.name}: unknown argument {unknown[0]!r}",
            next_step=f"its arguments are: {', '.join(allowed) or 'none'}",
        )
    confirm = False
    if tool.confirms and CONFIRM in args:
        confirm = _boolean(tool.name, CONFIRM, args[CONFIRM])
    values: dict[str, Any] = {}
    for arg in tool.args:
        if arg.name not in args or args[arg.name] is None:
            if arg.required:
                raise InvalidArgumentError(f"{tool.name}: missing argument {arg.name!r}")
            if arg.limit is not None and arg.limit.default is not None:
                values[arg.field] = arg.limit.default
            continue
        values[arg.field] = _value(tool.name, arg, args[arg.name])
    values.update(tool.fixed)
    return decode_request(tool.verb.contract, values), confirm


def _boolean(tool: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{tool}: {name} must be true or false")
    return value


def _value(tool: str, arg: ToolArg, value: Any) -> Any:
    if arg.command:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
            return tuple(value)
        raise InvalidArgumentError(f"{tool}: {arg.name} must be a command line (a string)")
    kinds = [k for k in arg.type.split(" | ") if k != "null"]
    kind = kinds[0] if kinds else "string"
    if kind.startswith("list["):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArgumentError(f"{tool}: {arg.name} must be a list of strings")
        return tuple(value)
    if kind == "bool":
        return _boolean(tool, arg.name, value)
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"{tool}: {arg.name} must be an integer")
        limit = arg.limit
        if limit is None:
            return value
        if limit.maximum is None and value < limit.minimum:
            raise InvalidArgumentError(
                f"{tool}: {arg.name} must be at least {limit.minimum}, not {value}",
                next_step=f"give {arg.name} {limit.minimum} or more, or leave it out",
            )
        if limit.maximum is not None and not limit.minimum <= value <= limit.maximum:
            raise InvalidArgumentError(
                f"{tool}: {arg.name} must be from {limit.minimum} to {limit.maximum}, not {value}",
                next_step=f"ask for at most {limit.maximum} at a time"
                if value > limit.maximum
                else f"give {arg.name} {limit.minimum} or more",
            )
        return value
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{tool}: {arg.name} must be a string")
    return value


class Toolbelt:
    """The tools of one folder, with the store kept open between calls.

    Each thread that calls keeps a store of its own (an SQLite connection is not shared
    across threads), so calls may run at once: a long command in a fork does not hold up a
    look at the timeline, and writers meet at the workspace's own locks as separate processes
    do. The workspace is looked up on every call, so a folder attached, forgotten or moved
    since the last call is answered as it is now.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._stores: dict[int, Any] = {}

    def close(self) -> None:
        """Closes every store kept open (a later call opens one again)."""
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def attached(self) -> bool:
        """Tells whether the folder is attached now (what decides whether tools are offered)."""
        from tillage.workspace.attach import find_workspace

        try:
            store = self._open_store()
            if store is None:
                return False
            return find_workspace(self.settings.home, self.settings.folder, store) is not None
        except Exception as exc:  # a damaged store: tools absent, not broken (no traceback)
            if self.settings.debug and not isinstance(exc, TillageError):
                import traceback

                traceback.print_exc()
            return False

    def tools(self) -> tuple[ToolDef, ...]:
        """The tools offered now: all of them when the folder is attached, none otherwise."""
        return tool_defs() if self.attached() else ()

    def call(
        self, name: str, args: Mapping[str, Any] | None, cancel: CancelToken | None = None
    ) -> ToolResult:
        """Calls the tool `name`; every failure is an error result, never an exception. A
        `cancel` token stops the commands the call runs (platform/commands.cancellable): the
        call then answers `interrupted`, with what its verb kept (a fork sealed as it was)."""
        if cancel is not None:
            from tillage.platform.commands import Cancelled, cancellable

            try:
                with cancellable(cancel):
                    return self._answered(name, args)
            except Cancelled as stop:
                return _cancelled(stop)
        return self._answered(name, args)

    def _answered(self, name: str, args: Mapping[str, Any] | None) -> ToolResult:
        tool = None
        try:
            tool = tool_def(name)
            if tool is None:
                from tillage.errors import NotFoundError

                raise NotFoundError(
                    f"no tool called {name!r}",
                    next_step="list the tools again: they are offered only while the folder "
                    "is attached",
                )
            return self._call(tool, dict(args or {}))
        except TillageError as err:
            return error_result(tool, err)
        except Exception as exc:  # the wire gets no traceback, ever
            if self.settings.debug:
                import traceback

                traceback.print_exc()
            return error_result(tool, InternalError(f"internal error ({type(exc).__name__})"))

    def run(self, verb_name: str, **params: Any) -> Any:
        """Runs the verb called `verb_name` with the open store and returns its result; raises
        its public errors (for a library's own methods; tools answer errors as results)."""
        from tillage.verbs.contract import decode_request
        from tillage.verbs.invoke import invoke
        from tillage.verbs.registry import by_name

        verb = by_name(verb_name)
        request = decode_request(verb.contract, params)
        return _held(invoke(verb, self.settings, request, store=self._open_store()))

    def _open_store(self) -> Any:
        """This thread's store, caught up with the log; None when there is no store yet."""
        from tillage.store.store import Store

        me = threading.get_ident()
        with self._lock:
            store = self._stores.get(me)
        if store is not None and store._conn is not None:
            store.catch_up()
            return store
        if not Store.exists(self.settings.home):
            return None
        store = Store.open(self.settings.home)
        with self._lock:
            self._stores[me] = store
        return store

    def _call(self, tool: ToolDef, args: dict[str, Any]) -> ToolResult:
        from tillage.verbs.invoke import invoke

        request, confirm = decode_args(tool, args)
        contract = tool.verb.contract
        store = self._open_store()
        if tool.confirms:
            assert contract.preview is not None and contract.confirmed is not None
            preview = invoke(tool.verb, self.settings, contract.preview(request), store=store)
            if not confirm or _changes_nothing(preview):
                return _answer(tool, preview, request)
            request = contract.confirmed(request)
        result = _held(invoke(tool.verb, self.settings, request, store=store))
        return _answer(tool, result, request)


def public_error(exc: BaseException) -> TillageError:
    """The public error `exc` is, or says it is: an OSError as the file-system failure it names
    (`unavailable`), anything else as `internal` naming its type (never a traceback)."""
    if isinstance(exc, TillageError):
        return exc
    if isinstance(exc, OSError):
        from tillage.errors import UnavailableError

        return UnavailableError(str(exc))
    return InternalError(f"internal error ({type(exc).__name__}: {exc})")


def _cancelled(stop: Cancelled) -> ToolResult:
    """A cancelled call's answer: `interrupted`, with what its verb noted it kept."""
    from tillage.errors import CommandInterruptedError, interruption_note

    details, next_step = interruption_note(stop) or (None, None)
    err = CommandInterruptedError(
        f"the call was stopped ({stop.reason}); its command was stopped with it",
        next_step=next_step,
        details=details,
    )
    return error_result(None, err)


def _answer(tool: ToolDef, result: Any, request: Any) -> ToolResult:
    """The result as a tool answers it: its document, once, and the text and structured
    result said from it."""
    from tillage.verbs.tool_shape import shape
    from tillage.verbs.tool_text import render
    from tillage.verbs.wire import to_wire

    document = to_wire(result)
    said = shape(document, tool)
    return ToolResult(render(tool, result, request, document, said), False, document, said)


def error_result(tool: ToolDef | None, err: TillageError) -> ToolResult:
    """An error as a tool answers it: the envelope every door has for the harness; for the
    model, its message and next step in the tools' words."""
    from tillage.verbs.tool_shape import shape_error
    from tillage.verbs.tool_text import error_text

    envelope = err.envelope()
    said = shape_error(envelope, tool)
    return ToolResult(error_text(said["error"]), True, {"error": envelope}, said)


# A file's content goes into a tool's document up to this many bytes (the text shows less).
CONTENT_LIMIT = 1 << 20


@dataclass(frozen=True)
class HeldContent:
    """A file's content as a tool answers it: read up to CONTENT_LIMIT, never streamed."""

    path: str
    size: int
    content_base64: str
    truncated: bool


@dataclass(frozen=True)
class HeldEvents:
    """A stream of events as a tool answers it: the ones asked for, read to the end."""

    events: tuple[Any, ...]


def _held(result: Any) -> Any:
    """A result a door would stream (a file's bytes, a list of events), read into a value a
    tool can answer with; anything else as it is."""
    import base64

    from tillage.verbs.wire import ByteStream

    content = getattr(result, "content_base64", None)
    if isinstance(content, ByteStream):
        content.check()
        data = bytearray()
        for piece in content:
            data += piece
            if len(data) >= CONTENT_LIMIT:
                break
        kept = bytes(data[:CONTENT_LIMIT])
        return HeldContent(
            path=result.path,
            size=result.size,
            content_base64=base64.b64encode(kept).decode(),
            truncated=len(kept) < result.size,
        )
    if callable(getattr(result, "stream", None)):
        held = getattr(result, "held", None)  # a stream that says how it is held
        return held() if callable(held) else HeldEvents(events=tuple(iter(result)))
    return result


def _changes_nothing(preview: Any) -> bool:
    """A preview that lists changes and lists none: applying it would change nothing, so it is
    not applied (no undo seal is made for nothing)."""
    changes = getattr(preview, "changes", None)
    return isinstance(changes, tuple) and not changes and dataclasses.is_dataclass(preview)
