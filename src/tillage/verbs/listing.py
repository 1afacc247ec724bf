"""The ls verb: a snapshot's files (or the live folder's, `@`), as restic ls and git ls-tree
list them, a page at a time when the listing is long."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import InvalidArgumentError
from tillage.verbs.contract import Effect, ToolLimit, ToolSpec, Verb, agent_contract, param
from tillage.verbs.invoke import Context
from tillage.verbs.timeline import ID_ERRORS, PathNotInSnapshotError
from tillage.verbs.views import SNAPSHOT_OR_LIVE, SnapshotInfo, snapshot_info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.core.models import Entry

# What `workspace_ls` gives a model by default and at most in one call (`after` pages on).
LS_TOOL_DEFAULT = 200
LS_TOOL_MAX = 1000


@dataclass(frozen=True)
class LsRequest:
    snapshot: str = param("list this: " + SNAPSHOT_OR_LIVE, positional=True)
    path: str | None = param(
        "only this workspace-relative file or folder (and everything below it)",
        default=None,
        positional=True,
    )
    long: bool = param(
        "a long listing: also each entry's modification time and content ID",
        default=False,
        short="-l",
    )
    limit: int | None = param(
        "at most this many entries (default: all); `more` says how many are left",
        default=None,
        short="-n",
    )
    after: str | None = param(
        "only entries after this path, in listing order (the last path of a page: the next "
        "page starts after it)",
        default=None,
        metavar="PATH",
    )


@dataclass(frozen=True)
class LsEntryInfo:
    """One name: `kind` is file, dir, symlink or special; `mode` its permission bits (0o644 is
    420); `size` null for a folder; `content` the content ID (a file's chunk or
    blob, a folder's tree), null for a symlink, whose `target` is given instead."""

    path: str
    kind: str
    mode: int
    size: int | None
    mtime: str
    content: str | None
    target: str | None


@dataclass(frozen=True)
class LsResult:
    # The snapshot listed; null for `@` (the folder as it is now).
    snapshot: SnapshotInfo | None
    path: str | None
    entries: tuple[LsEntryInfo, ...]
    # Entries left after this page (0 when it is the last), and the `--after` that lists them.
    more: int
    next_after: str | None
    long: bool = False


_KINDS = {1: "file", 2: "dir", 3: "symlink", 4: "special"}


def _entry_info(path: str, entry: Entry) -> LsEntryInfo:
    from tillage.core.models import ContentKind, EntryKind
    from tillage.core.paths import fs_decode
    from tillage.platform.clock import rfc3339

    symlink = entry.kind is EntryKind.SYMLINK
    return LsEntryInfo(
        path=path,
        kind=_KINDS.get(int(entry.kind), "special"),
        mode=entry.mode,
        size=None if entry.kind is EntryKind.DIR else entry.size,
        mtime=rfc3339(entry.mtime_ns),
        content=None
        if symlink or entry.content_kind is ContentKind.NONE or not entry.content
        else entry.content.hex(),
        target=fs_decode(entry.content) if symlink else None,
    )


def ls(ctx: Context, req: LsRequest) -> LsResult:
    from tillage.core.paths import covers, parse
    from tillage.errors import echo
    from tillage.verbs.texts import side

    if req.limit is not None and req.limit < 1:
        raise InvalidArgumentError("-n must be at least 1")
    scope = parse(req.path) if req.path is not None else None
    where = side(ctx.workspace, req.snapshot, None if scope is None else (scope,))
    paths = sorted(p for p in where.manifest if scope is None or covers(scope, p))
    if scope is not None and scope not in where.manifest:
        name = "the folder" if where.row is None else f"snapshot {where.row.id[:12]}"
        raise PathNotInSnapshotError(f"{echo(scope)} is not in {name}")
    if req.after is not None:
        import bisect

        paths = paths[bisect.bisect_right(paths, req.after) :]
    page = paths if req.limit is None else paths[: req.limit]
    more = len(paths) - len(page)
    return LsResult(
        snapshot=snapshot_info(where.row) if where.row is not None else None,
        path=scope,
        entries=tuple(_entry_info(p, where.manifest[p]) for p in page),
        more=more,
        next_after=page[-1] if more and page else None,
        long=req.long,
    )


VERBS = (
    Verb(
        agent_contract(
            "timeline.ls",
            "ls",
            LsRequest,
            LsResult,
            Effect.READ,
            "A snapshot's files and folders (or the live folder's, `@`), below PATH when given, "
            "in path order: kind, mode, size, modification time, content ID.",
            errors=(*ID_ERRORS, PathNotInSnapshotError),
            tool=ToolSpec(
                hidden=("long",),
                limits=(ToolLimit("limit", LS_TOOL_DEFAULT, LS_TOOL_MAX),),
                guide="Lists what a snapshot holds without restoring it; `path` narrows it to "
                "a folder, and `after` (the last path of a page) gets the next page.",
            ),
        ),
        ls,
    ),
)
