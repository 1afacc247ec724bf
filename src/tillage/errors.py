"""The public error catalogue: the base class, the shared codes and each module's code range.

Callers branch on `code` or `name`, never on `message` (docs/CONTRACT.md). Error classes live
beside the code that raises them; this module holds only what every layer shares, and it imports
nothing from tillage so that every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar


# Each module answers its own errors with codes inside its range; the shared codes below may be
# answered by any module for the same condition. Ranges are closed intervals, high to low.
SHARED_RANGE = (-32069, -32060)
MODULE_RANGES: Mapping[str, tuple[int, int]] = {
    "shared": SHARED_RANGE,
    "host": (-32079, -32070),
    "workspace": (-32109, -32080),
    "store": (-32139, -32110),
    "rewind": (-32159, -32140),
    "forks": (-32189, -32160),
    "merge": (-32209, -32190),
    "claims": (-32229, -32210),
    "sessions": (-32249, -32230),
    "projection": (-32269, -32250),
    "lifecycle": (-32289, -32270),
    "sync": (-32309, -32290),
    "oplog": (-32319, -32310),
    "names": (-32324, -32320),  # names for snapshots (head, head~N, latest, @, fork names)
    "ui": (-32339, -32330),  # Mission Control's web door (verbs/ui.py)
}


ECHO_LIMIT = 120
MESSAGE_LIMIT = 2000


def echo(value: str, limit: int = ECHO_LIMIT) -> str:
    """Returns `value` quoted for an error message, cut to `limit` characters: a caller's
    100,000-character argument must not come back whole."""
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + f"... ({len(value)} characters)"


class TillageError(Exception):
    """A failure a caller may see: a stable `code`, a dotted `name`, a message and a next step."""

    code: ClassVar[int] = 0
    name: ClassVar[str] = ""
    module: ClassVar[str] = ""
    next_step: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        next_step: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        if len(message) > MESSAGE_LIMIT:
            message = message[:MESSAGE_LIMIT] + f"... ({len(message)} characters)"
        super().__init__(message)
        self.message = message
        self.next = next_step if next_step is not None else type(self).next_step
        self.details: dict[str, Any] = dict(details or {})

    def envelope(self) -> dict[str, Any]:
        """Returns the error as the wire envelope body (`{"error": <this>}`)."""
        body: dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "next": self.next,
        }
        if self.details:
            body["details"] = self.details
        return body


class NotAttachedError(TillageError):
    """The folder is not attached to tillage: nothing to act on yet."""

    code = -32060
    name = "workspace.not_attached"
    module = "shared"
    next_step = "attach this folder with `till watch`"


class NotFoundError(TillageError):
    """The thing named (a snapshot, a path in it) does not exist."""

    code = -32061
    name = "not_found"
    module = "shared"
    next_step = "list what exists with `till timeline`"


class ConflictError(TillageError):
    """The change collides with another one and was not made."""

    code = -32062
    name = "conflict"
    module = "shared"
    next_step = "look at the conflicting paths and try again"


class AmbiguousError(TillageError):
    """An ID prefix matches more than one thing."""

    code = -32063
    name = "ambiguous"
    module = "shared"
    next_step = "give more characters of the ID"


class ConfirmationRequiredError(TillageError):
    """A destructive operation was asked for without `--yes`; nothing changed."""

    code = -32064
    name = "confirmation_required"
    module = "shared"
    next_step = "preview with --dry-run, then repeat with the explicit ID and --yes"


class BusyError(TillageError):
    """Another tillage process holds the lock this operation needs."""

    code = -32065
    name = "busy"
    module = "shared"
    next_step = "another tillage process holds the lock; retry in a moment"


class InvalidArgumentError(TillageError):
    """An argument is malformed or not allowed (a path escaping the workspace, say)."""

    code = -32066
    name = "invalid_argument"
    module = "shared"
    next_step = "fix the argument and call again"


class IntegrityError(TillageError):
    """The store is damaged where this operation needed it; no wrong bytes are served."""

    code = -32067
    name = "integrity"
    module = "shared"
    next_step = "run `till verify --repair`"


class UnavailableError(TillageError):
    """The capability cannot work here."""

    code = -32068
    name = "unavailable"
    module = "shared"
    next_step = "this capability cannot work here"


class InternalError(TillageError):
    """Not raised by tillage code: the host wraps an unexpected exception in it for the wire."""

    code = -32069
    name = "internal"
    module = "shared"
    next_step = "this is a bug in tillage; rerun with --debug and report the traceback"


class UsageError(TillageError):
    """An unknown flag, a missing argument or an unknown command: exit status 2."""

    code = -32070
    name = "usage"
    module = "host"
    next_step = "see `till --help` or `till COMMAND --help`"


class CommandInterruptedError(TillageError):
    """The command was interrupted (Ctrl-C or SIGTERM); nothing is left half-done that the
    next command does not finish. `details`, when the command noted any on the interruption
    (note_interruption), say what it made durable before it stopped."""

    code = -32071
    name = "interrupted"
    module = "host"
    next_step = "run the command again; an interrupted rewind is finished by the next command"


_NOTE = "_tillage_interrupted"


def note_interruption(
    interruption: BaseException, details: Mapping[str, Any], *, next_step: str | None = None
) -> None:
    """Records on an interruption (a KeyboardInterrupt going on up) what the command made
    durable before it stopped, for the host's `interrupted` answer to carry as its `details`
    and next step: `try` names the snapshots sealed before and after, so the attempt can be
    undone by ID. The interruption itself is left as it is (its class tells Ctrl-C from
    SIGTERM)."""
    setattr(interruption, _NOTE, (dict(details), next_step))


def interruption_note(interruption: BaseException) -> tuple[dict[str, Any], str | None] | None:
    """What note_interruption() recorded on `interruption`: (details, next step), or None."""
    note = getattr(interruption, _NOTE, None)
    return note if isinstance(note, tuple) else None


SHARED_ERRORS: tuple[type[TillageError], ...] = (
    NotAttachedError,
    NotFoundError,
    ConflictError,
    AmbiguousError,
    ConfirmationRequiredError,
    BusyError,
    InvalidArgumentError,
    IntegrityError,
    UnavailableError,
    InternalError,
)


def is_shared(code: int) -> bool:
    """Tells whether `code` is one of the shared codes any module may answer."""
    low, high = SHARED_RANGE
    return low <= code <= high


def all_error_classes() -> Iterator[type[TillageError]]:
    """Yields every concrete TillageError subclass imported so far (the catalogue)."""
    stack: list[type[TillageError]] = list(TillageError.__subclasses__())
    seen: set[type[TillageError]] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        if cls.code:
            yield cls


def catalogue_problems(classes: list[type[TillageError]]) -> list[str]:
    """Returns what is wrong with a set of error classes: unknown module, code out of range,
    a module-specific code used twice, or a name used twice."""
    problems: list[str] = []
    codes: dict[int, str] = {}
    names: dict[str, type[TillageError]] = {}
    for cls in classes:
        label = f"{cls.__module__}.{cls.__qualname__}"
        if cls.module not in MODULE_RANGES:
            problems.append(f"{label}: unknown module {cls.module!r}")
            continue
        low, high = MODULE_RANGES[cls.module]
        if not is_shared(cls.code) and not low <= cls.code <= high:
            problems.append(f"{label}: code {cls.code} outside {cls.module} range {low}..{high}")
        if not is_shared(cls.code):
            if cls.code in codes:
                problems.append(f"{label}: code {cls.code} already used by {codes[cls.code]}")
            codes[cls.code] = label
        if cls.name in names and names[cls.name] is not cls:
            problems.append(f"{label}: name {cls.name!r} already used")
        names[cls.name] = cls
    return problems
