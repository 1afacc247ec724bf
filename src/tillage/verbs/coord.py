"""The blackboard verbs: `till coord write | read | list`, a value under a key that the
workspace and every fork of its family see at once (features/coord/board.py keeps them).

A value is at most 1 MiB, given as text (`--value`), a file's bytes (`--file`) or stdin's;
each write is sealed with its owner (`--owner`, else TILLAGE_AGENT), its time, size and
BLAKE3 digest, and kept in the key's history, so a reader can tell who wrote what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, echo
from tillage.features.coord.errors import (
    BadOwnerError,
    BadValueError,
    InvalidKeyError,
    KeyNotFoundError,
    ValueDamagedError,
    ValueTooBigError,
)
from tillage.verbs.contract import (
    Effect,
    StdinValue,
    ToolLimit,
    ToolSpec,
    Verb,
    agent_contract,
    param,
)
from tillage.verbs.invoke import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.features.coord.keys import Entry

# Declared here (features/coord/keys.py says the same; a test keeps them equal) so listing
# contracts imports no feature code.
MAX_VALUE = 1 << 20
PATH_DOC = (
    "the key: segments of a-z, A-Z, 0-9, '.', '_', '-' and ':' separated by '/', at most 200 "
    "characters (a name, not a file path)"
)


@dataclass(frozen=True)
class CoordEntryInfo:
    """One write of a key: who (`owner`, and the folder it was written in: `workspace`),
    when, its size in bytes and BLAKE3 `digest`, and its `version` (1, 2, ... per key)."""

    path: str
    owner: str
    written_at: str
    size: int
    digest: str
    version: int
    workspace: str


def _info(entry: Entry) -> CoordEntryInfo:
    from tillage.platform.clock import rfc3339

    return CoordEntryInfo(
        path=entry.path,
        owner=entry.owner,
        written_at=rfc3339(entry.written_at_ns),
        size=entry.size,
        digest=entry.digest,
        version=entry.version,
        workspace=entry.workspace,
    )


# -- write -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordWriteRequest:
    path: str = param(PATH_DOC, positional=True, metavar="PATH")
    value: str | bytes | None = param(
        "the value as text (without --value or --file the command line reads it from stdin)",
        default=None,
        metavar="V",
    )
    file: str | None = param("read the value from this file, byte for byte", default=None)
    owner: str | None = param("who writes it (default: TILLAGE_AGENT)", default=None, metavar="O")


def coord_write(ctx: Context, req: CoordWriteRequest) -> CoordEntryInfo:
    from tillage.features.coord.board import write
    from tillage.features.coord.keys import check_key

    check_key(req.path)  # a bad key is answered before any file is read
    data = _value(ctx, req)
    return _info(write(ctx.workspace, req.path, data, req.owner or ctx.settings.agent))


def _value(ctx: Context, req: CoordWriteRequest) -> bytes:
    """The value's bytes from the one source given; BadValueError for none or two."""
    from tillage.features.coord.keys import check_size

    if req.value is not None and req.file is not None:
        raise BadValueError("give the value once: --value or --file, not both")
    if isinstance(req.value, bytes):
        check_size(len(req.value), more=True)  # stdin is read to one byte over the limit
        return req.value
    if isinstance(req.value, str):
        return req.value.encode("utf-8", "surrogateescape")  # argv's own bytes
    if req.file is not None:
        return _read_file(ctx, req.file)
    raise BadValueError("no value: give --value V, --file F, or pipe it on stdin")


def _read_file(ctx: Context, name: str) -> bytes:
    from pathlib import Path

    from tillage.features.coord.keys import check_size

    path = Path(name) if Path(name).is_absolute() else ctx.settings.folder / name
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_VALUE + 1)
            if len(data) > MAX_VALUE:
                import os

                check_size(os.fstat(f.fileno()).st_size)
    except OSError as exc:
        raise BadValueError(
            f"cannot read --file {echo(name)}: {exc.strerror or exc}",
            details={"file": str(path)},
        ) from None
    return data


# -- read ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordReadRequest:
    path: str = param(PATH_DOC, positional=True, metavar="PATH")
    history: bool = param(
        "also list the key's writes, newest first: who, when, size, digest", default=False
    )
    limit: int = param("with --history, at most this many writes", default=20, short="-n")


@dataclass(frozen=True, kw_only=True)
class CoordReadResult(CoordEntryInfo):
    """The value as last written and who wrote it: `value` is its text when it is UTF-8,
    else null and `value_base64` holds its bytes; `history` with --history, else null."""

    value: str | None
    value_base64: str | None
    history: tuple[CoordEntryInfo, ...] | None = None

    def raw(self) -> bytes | str:
        """What the command line prints for people: the value's bytes as they are, or the
        history's lines when it was asked for."""
        if self.history is not None:
            return "".join(
                f"v{h.version}  {h.written_at}  {h.owner}  {h.size} B  {h.digest[:12]}  "
                f"{h.workspace}\n"
                for h in self.history
            )
        if self.value is not None:
            return self.value.encode()
        import base64

        return base64.b64decode(self.value_base64 or "")


def coord_read(ctx: Context, req: CoordReadRequest) -> CoordReadResult:
    import base64

    from tillage.errors import InvalidArgumentError
    from tillage.features.coord.board import history, read

    if req.limit < 1:
        raise InvalidArgumentError("--limit must be at least 1")
    entry, data = read(ctx.workspace, req.path)
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    past = None
    if req.history:
        past = tuple(_info(e) for e in history(ctx.workspace, req.path, req.limit))
    return CoordReadResult(
        **_info(entry).__dict__,
        value=text,
        value_base64=None if text is not None else base64.b64encode(data).decode(),
        history=past,
    )


# -- list ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordListRequest:
    prefix: str = param(
        "only keys that start with this (`tasks/`)", default="", positional=True, metavar="PREFIX"
    )


@dataclass(frozen=True)
class CoordListResult:
    """The family's keys, by key, each as last written (no values: `read` gets one)."""

    entries: tuple[CoordEntryInfo, ...]


def coord_list(ctx: Context, req: CoordListRequest) -> CoordListResult:
    from tillage.features.coord.board import listing

    return CoordListResult(entries=tuple(_info(e) for e in listing(ctx.workspace, req.prefix)))


FAMILY = "shared by the workspace and all its forks, forks of forks too"

VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        agent_contract(
            "coord.write",
            "coord write",
            CoordWriteRequest,
            CoordEntryInfo,
            Effect.WRITE,
            f"Write a value (at most 1 MiB) under a key of the family's blackboard, {FAMILY}. "
            "The value is --value's text, --file's bytes, or stdin's; the write is atomic and "
            "sealed with its owner, time, size and digest, and kept in the key's history.",
            errors=(
                InvalidKeyError,
                BadValueError,
                BadOwnerError,
                ValueTooBigError,
                BusyError,
            ),
            stdin_value=StdinValue("value", MAX_VALUE, unless=("file",)),
            tool=ToolSpec(
                doc=f"Write a value (at most 1 MiB) under a key of the family's blackboard, "
                f"{FAMILY}. The value is `value`'s text or the bytes of the file `file`; the "
                "write is atomic and sealed with its owner, time, size and digest, and kept in "
                "the key's history.",
                docs=(("value", "the value as text"),),
                guide="Use it to leave a plan, a result or a pointer for the other agents of "
                "the family (the parent and every fork); give `owner` so readers know it is "
                "yours. A later write replaces the value; its history keeps who wrote what.",
            ),
        ),
        coord_write,
    ),
    Verb(
        agent_contract(
            "coord.read",
            "coord read",
            CoordReadRequest,
            CoordReadResult,
            Effect.READ,
            f"Read the value under a key of the family's blackboard ({FAMILY}) and who wrote "
            "it: `value` (UTF-8 text) or `value_base64`, with owner, written_at, size and "
            "digest; --history lists the key's writes. Without --json it prints the value.",
            errors=(InvalidKeyError, KeyNotFoundError, ValueDamagedError),
            tool=ToolSpec(
                limits=(ToolLimit("limit", None, None),),
                doc=f"Read the value under a key of the family's blackboard ({FAMILY}) and "
                "who wrote it: `value` (UTF-8 text) or `value_base64`, with owner, written_at, "
                "size and digest; `history: true` lists the key's writes too.",
                docs=(("limit", "with `history: true`, at most this many writes"),),
            ),
            raw_output=lambda result: result.raw(),
        ),
        coord_read,
    ),
    Verb(
        agent_contract(
            "coord.list",
            "coord list",
            CoordListRequest,
            CoordListResult,
            Effect.READ,
            f"List the keys of the family's blackboard ({FAMILY}), each as last written: "
            "owner, written_at, size, digest, version.",
        ),
        coord_list,
    ),
)
