"""The universe verbs: fork, forks, fork-rm, run, exec."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tillage.errors import BusyError, TillageError
from tillage.features.forks.errors import (
    BadDestinationError,
    BadPortError,
    DestinationExistsError,
    ForkCopyError,
    ForkExistsError,
    ForkFolderMissingError,
    ForkHasForksError,
    ForkNotFoundError,
    InvalidForkNameError,
    NoFreePortError,
    NotTheForkError,
    SnapshotPartialError,
)
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import (
    Audience,
    Contract,
    Effect,
    Scope,
    ToolLimit,
    ToolSpec,
    Verb,
    agent_contract,
    param,
)
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COMMAND_DOC = (
    "the command, after `--`; one word runs through /bin/sh -c, several are the argv; it "
    "gets TILLAGE_FORK (the fork's name), TILLAGE_FORK_PATH, TILLAGE_FORK_INDEX and "
    "TILLAGE_FORK_COUNT (its place in its batch, 1..N) and PORT (the fork's own TCP port, "
    "held by no other live fork of the family: chosen when the fork is made, the first free "
    "one above the caller's $PORT, or above 3000, skipping ports in use on 127.0.0.1)"
)
# How many universes one exec makes at most (features.forks.ops checks it; a test holds the two
# equal): declared here so listing contracts imports no feature code.
MAX_UNIVERSES = 64
# COMMAND_DOC for a model: a tool's `command` is one string, run through /bin/sh -c.
TOOL_COMMAND_DOC = (
    "the command line to run in the fork, through /bin/sh -c; it gets TILLAGE_FORK (the "
    "fork's name), TILLAGE_FORK_PATH, TILLAGE_FORK_INDEX and TILLAGE_FORK_COUNT (its place in "
    "its batch, 1..N) and PORT (the fork's own TCP port, held by no other live fork of the "
    "family)"
)
AT_ERRORS = (BadSnapshotIdError, SnapshotNotFoundError, SnapshotAmbiguousError)
MAKE_ERRORS = (
    InvalidForkNameError,
    ForkExistsError,
    DestinationExistsError,
    BadDestinationError,
    ForkCopyError,
    SnapshotPartialError,
    BadPortError,
    NoFreePortError,
    BusyError,
    *AT_ERRORS,
)


@dataclass(frozen=True)
class ForkInfo:
    """A universe and what happened in it: `base`/`head` are snapshot IDs (the state it was
    made from, and its newest sealed state); `driver` how it was copied (null when it was not
    made now); `exit_code`/`output` the command's (null when none ran); `port` the fork's
    own TCP port (its command's PORT, kept for the fork's life); `index`/`count` the
    command's place in its batch (TILLAGE_FORK_INDEX/TILLAGE_FORK_COUNT: 1 of 1 here)."""

    name: str
    path: str
    base: str
    head: str | None
    driver: str | None
    exit_code: int | None
    output: str | None
    workspace: str
    parent: str
    index: int
    port: int | None
    created: bool
    files: int | None
    bytes: int | None
    seconds: float | None
    count: int


@dataclass(frozen=True)
class ForkResult:
    fork: ForkInfo

    def undo_plan(self, _req: Any) -> dict[str, Any] | None:
        """`till undo`: remove the fork made (sealed first: undoing the undo restores it)."""
        if not self.fork.created:
            return {"kind": "none", "why": "the command ran in a fork that existed already"}
        return {"kind": "fork_rm", "forks": [self.fork.workspace]}

    def exit_status(self) -> int:
        """The command's own status (0 when no command ran)."""
        return self.fork.exit_code or 0


def _fork_info(ws: Any, ran: Any = None, made: Any = None) -> ForkInfo:
    forked = made if made is not None else ran.made
    row = ran.row if ran is not None else forked.row
    head = (ran.head.id if ran.head is not None else None) if ran is not None else forked.head.id
    return ForkInfo(
        name=row.name,
        path=row.root,
        base=row.base,
        head=head,
        driver=forked.driver if forked is not None else None,
        exit_code=ran.exit_code if ran is not None else None,
        output=ran.output if ran is not None else None,
        workspace=row.workspace,
        parent=str(ws.root),
        index=ran.index if ran is not None else 1,
        port=row.port,
        created=forked is not None,
        files=forked.files if forked is not None else None,
        bytes=forked.bytes if forked is not None else None,
        seconds=round(forked.seconds, 3) if forked is not None else None,
        count=ran.count if ran is not None else 1,
    )


def _destination(ctx: Context, raw: str | None) -> Path | None:
    """--destination, relative to the caller's folder."""
    if raw is None:
        return None
    path = Path(raw)
    return path if path.is_absolute() else ctx.settings.folder / path


# -- fork ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForkRequest:
    name: str | None = param(
        "the fork's name: a short slug (a-z, 0-9, '.', '_', '-'; at most 40); default fork-N, "
        "the first N free",
        default=None,
        positional=True,
    )
    destination: str | None = param(
        "where to make it (must not exist; default: <workspace>.forks/NAME beside it)",
        default=None,
        metavar="D",
    )
    at: str | None = param(
        "fork this stored snapshot instead of the live folder (head, head~N, a name, an ID)",
        default=None,
        metavar="ID",
    )
    command: tuple[str, ...] = param(
        "optionally a command to run in the new fork, after `--` (see `till run`)",
        default=(),
        remainder=True,
        metavar="CMD",
    )


def fork(ctx: Context, req: ForkRequest) -> ForkResult:
    from tillage.features.forks.errors import ForkExistsError

    if req.name is not None:
        return _fork_named(ctx, req, req.name)
    for _attempt in range(AUTO_NAME_ATTEMPTS):
        try:
            return _fork_named(ctx, req, _free_name(ctx))
        except ForkExistsError:
            continue  # another nameless fork took it between the look and the make
    return _fork_named(ctx, req, _free_name(ctx))


# How often a nameless fork looks again for a free name when a concurrent one took it.
AUTO_NAME_ATTEMPTS = 5


def _free_name(ctx: Context) -> str:
    """`fork-N` with the first N that no live fork of this workspace has and no folder
    occupies at the default destination."""
    ws = ctx.workspace
    n = 1
    while True:
        name = f"fork-{n}"
        default = Path(f"{ws.root}.forks") / name
        taken = default.is_symlink() or default.exists()
        if ws.store.fork_named(ws.id, name) is None and not taken:
            return name
        n += 1


def _fork_named(ctx: Context, req: ForkRequest, name: str) -> ForkResult:
    ws = ctx.workspace
    destination = _destination(ctx, req.destination)
    if req.command:
        from tillage.features.forks.ops import run_in_fork

        ran = run_in_fork(
            ws,
            name,
            req.command,
            at=req.at,
            create=True,
            destination=destination,
            caller=ctx.settings.folder,
            launch=ctx.settings.launch,
            on_progress=ctx.on_progress,
        )
        return ForkResult(_fork_info(ws, ran=ran))
    from tillage.features.forks.fork import create_fork
    from tillage.features.forks.ports import port_base

    made = create_fork(
        ws,
        name,
        destination=destination,
        at=req.at,
        on_progress=ctx.on_progress,
        port_base=port_base(ctx.settings.launch),
    )
    return ForkResult(_fork_info(ws, made=made))


# -- forks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForksRequest:
    no_disk: bool = param(
        "skip measuring each fork's disk cost (disk_bytes null): faster with big forks",
        default=False,
    )


@dataclass(frozen=True)
class ForkListInfo:
    """A live universe: `disk_bytes` what it costs beyond what it shares with its parent,
    `changed_paths` paths its head changed since its base, `conflicts` paths it changed that
    another fork or the workspace changed too; `missing` when its folder is gone; `port` its
    own TCP port (null for a fork made before ports were recorded, until a command runs in
    it); `index` its place among every fork ever made of this workspace."""

    name: str
    path: str
    base: str
    head: str | None
    created_at: str
    disk_bytes: int | None
    changed_paths: int
    conflicts: tuple[str, ...]
    missing: bool
    workspace: str
    index: int
    port: int | None


@dataclass(frozen=True)
class ForksResult:
    forks: tuple[ForkListInfo, ...]


def forks(ctx: Context, req: ForksRequest) -> ForksResult:
    from tillage.features.forks.listing import list_forks
    from tillage.features.radar.radar import conflicts_by_fork
    from tillage.platform.clock import rfc3339

    ws = ctx.workspace
    listing = list_forks(ws, with_disk=not req.no_disk)
    conflicts = conflicts_by_fork(ws) if listing else {}
    return ForksResult(
        forks=tuple(
            ForkListInfo(
                name=f.row.name,
                path=f.row.root,
                base=f.row.base,
                head=f.head.id if f.head is not None else None,
                created_at=rfc3339(f.row.created_ns),
                disk_bytes=f.disk_bytes,
                changed_paths=f.changed_paths,
                conflicts=tuple(conflicts.get(f.row.name, ())),
                missing=f.missing,
                workspace=f.row.workspace,
                index=f.index,
                port=f.row.port,
            )
            for f in listing
        )
    )


# -- fork-rm ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForkRemoveRequest:
    name: str = param("the fork to remove", positional=True)
    keep_files: bool = param(
        "retire the fork (seal it, end its timeline) but leave its folder on disk", default=False
    )
    dry_run: bool = param("say what would be removed and change nothing", default=False)
    yes: bool = param("confirm: delete the fork's folder", default=False)
    destination: str | None = param(
        "where you expect the fork to be: refused, removing nothing, when it is elsewhere "
        "(a stale name never removes another fork)",
        default=None,
        metavar="D",
    )


@dataclass(frozen=True)
class ForkRemoveResult:
    """`snapshot` is the fork's last state, sealed before removal: restorable by ID from the
    parent (`till cat`, `till rewind`)."""

    name: str
    files_removed: int
    snapshot: SnapshotInfo | None
    removed: bool
    kept_files: bool
    path: str | None
    # The claims the fork had taken, released with it (each a `released` event): IDs.
    claims_released: tuple[str, ...]
    # The fork's own workspace ID (its timeline).
    workspace: str | None = None

    def undo_plan(self, _req: ForkRemoveRequest) -> dict[str, Any] | None:
        """`till undo`: the fork back, the same fork, from its last state."""
        if not self.removed or self.workspace is None:
            return None
        return {"kind": "fork_restore", "forks": [self.workspace]}


def fork_remove(ctx: Context, req: ForkRemoveRequest) -> ForkRemoveResult:
    from tillage.features.forks.ops import remove_fork
    from tillage.watch import daemon

    home = ctx.workspace.store.home
    done = remove_fork(
        ctx.workspace,
        req.name,
        keep_files=req.keep_files,
        dry_run=req.dry_run,
        stop_watcher=lambda fork_id: daemon.stop(home, fork_id),
        expected_root=_destination(ctx, req.destination),
    )
    released: tuple[str, ...] = ()
    if done.removed:
        from tillage.features.radar.claims import family_of, release_taken_in

        ws = ctx.workspace
        taken = release_taken_in(ws.store, family_of(ws), done.row.workspace, by=ws.id)
        released = tuple(c.id for c in taken)
    return ForkRemoveResult(
        name=done.row.name,
        files_removed=done.files_removed,
        snapshot=snapshot_info(done.snapshot) if done.snapshot is not None else None,
        removed=done.removed,
        kept_files=done.kept_files,
        path=done.folder,
        claims_released=released,
        workspace=done.row.workspace,
    )


def _remove_needs_yes(req: ForkRemoveRequest) -> bool:
    return not (req.yes or req.dry_run or req.keep_files)


def _validate_remove(ctx: Context, req: ForkRemoveRequest) -> None:
    """An unknown or invalid name is answered before asking for --yes, once what a killed fork
    command left is finished (a removal killed after its record leaves the fork's files in its
    trash: the name is gone, its files must go too)."""
    from tillage.features.forks.fork import finish_pending, require_fork
    from tillage.features.forks.ops import check_expected_root

    finish_pending(ctx.workspace)
    check_expected_root(require_fork(ctx.workspace, req.name), _destination(ctx, req.destination))


def _remove_preview(req: ForkRemoveRequest) -> ForkRemoveRequest:
    return replace(req, dry_run=True)


def _remove_confirmed(req: ForkRemoveRequest) -> ForkRemoveRequest:
    return replace(req, yes=True)


# -- run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest:
    name: str = param("the fork to run in (made first when it does not exist)", positional=True)
    command: tuple[str, ...] = param(COMMAND_DOC, remainder=True, metavar="CMD")
    at: str | None = param(
        "make the fork of this stored snapshot (the fork must not exist yet)",
        default=None,
        metavar="ID",
    )


def run(ctx: Context, req: RunRequest) -> ForkResult:
    from tillage.features.forks.ops import run_in_fork

    ran = run_in_fork(
        ctx.workspace,
        req.name,
        req.command,
        at=req.at,
        caller=ctx.settings.folder,
        launch=ctx.settings.launch,
        on_progress=ctx.on_progress,
    )
    return ForkResult(_fork_info(ctx.workspace, ran=ran))


# -- exec ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecRequest:
    command: tuple[str, ...] = param(COMMAND_DOC, remainder=True, metavar="CMD")
    n: int = param(
        "how many universes to run at once", default=1, short="-n", flag="--count", metavar="N"
    )
    fork: str | None = param(
        "name prefix of the universes: NAME-1, NAME-2, ... (default: exec)",
        default=None,
        metavar="NAME",
    )
    at: str | None = param(
        "make the universes of this stored snapshot instead of the live folder",
        default=None,
        metavar="ID",
    )
    plan: bool = param("say which driver and how many bytes, and create nothing", default=False)


@dataclass(frozen=True)
class UniverseInfo:
    """One universe of the batch: `fork` and `name` both name it (`name` as in the fork
    object of `fork` and `run`, so one field works everywhere); `index`/`count` its
    command's TILLAGE_FORK_INDEX and TILLAGE_FORK_COUNT; `port` its PORT (the fork's own,
    kept for its life)."""

    fork: str
    path: str
    base: str
    head: str | None
    exit_code: int
    output: str
    workspace: str
    index: int
    port: int | None
    driver: str | None
    count: int
    name: str


@dataclass(frozen=True)
class PlanInfo:
    driver: str
    count: int
    bytes: int
    files: int
    total_bytes: int
    extra_disk_bytes: int


@dataclass(frozen=True)
class ExecResult:
    universes: tuple[UniverseInfo, ...]
    plan: PlanInfo | None

    def undo_plan(self, _req: Any) -> dict[str, Any] | None:
        """`till undo`: remove the universes made (each sealed first); none for a plan."""
        if not self.universes:
            return None
        return {"kind": "fork_rm", "forks": [u.workspace for u in self.universes]}

    def exit_status(self) -> int:
        """The first non-zero status, in universe order (0 when all passed or planned)."""
        return next((u.exit_code for u in self.universes if u.exit_code != 0), 0)


def exec_(ctx: Context, req: ExecRequest) -> ExecResult:
    from tillage.features.forks import ops as fork_ops

    ws = ctx.workspace
    if req.plan:
        p = fork_ops.plan_exec(ws, req.n)
        return ExecResult(
            universes=(),
            plan=PlanInfo(p.driver, p.count, p.bytes, p.files, p.total_bytes, p.extra_disk_bytes),
        )
    ran = fork_ops.exec_universes(
        ws,
        req.command,
        count=req.n,
        prefix=req.fork,
        at=req.at,
        caller=ctx.settings.folder,
        launch=ctx.settings.launch,
    )
    return ExecResult(
        universes=tuple(
            UniverseInfo(
                fork=r.row.name,
                path=r.row.root,
                base=r.base,
                head=r.head.id if r.head is not None else None,
                exit_code=r.exit_code,
                output=r.output,
                workspace=r.row.workspace,
                index=r.index,
                port=r.row.port,
                driver=r.made.driver if r.made is not None else None,
                count=r.count,
                name=r.row.name,
            )
            for r in ran
        ),
        plan=None,
    )


def _contract(
    name: str,
    cli: str,
    request: type,
    result: type,
    effect: Effect,
    doc: str,
    errors: tuple[type[TillageError], ...],
    tool: ToolSpec | None = None,
) -> Contract[Any, Any]:
    """A universe verb: its errors always named."""
    return agent_contract(name, cli, request, result, effect, doc, errors=errors, tool=tool)


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        _contract(
            "fork.create",
            "fork",
            ForkRequest,
            ForkResult,
            Effect.WRITE,
            "Make a universe: a full-state, attached copy of the live workspace (sealed first "
            "as its base) or of snapshot --at, with its own timeline; default destination "
            "<workspace>.forks/NAME. It holds a TCP port of its own in its family (`port`: the "
            "first free one above the caller's $PORT, or above 3000 when it is unset), kept "
            "for its life. With `-- CMD` the command runs in it and its status is this "
            "command's.",
            MAKE_ERRORS,
            ToolSpec(
                name="workspace_fork",
                hidden=("destination",),
                doc="Make a universe: a full-state, attached copy of the live workspace "
                "(sealed first as its base) or of the snapshot `at`, with its own timeline, "
                "next to the workspace. It holds a TCP port of its own in its family (`port`), "
                "kept for its life.",
                docs=(
                    (
                        "command",
                        "optionally a command line to run in the new fork (through "
                        "/bin/sh -c), as workspace_run does",
                    ),
                    ("at", "fork this stored snapshot (its whole ID) instead of the live folder"),
                ),
                guide="Use it to try something risky without touching the real folder: "
                "`command` runs in the copy through /bin/sh -c, and its exit code and the end "
                "of its output come back. A non-zero exit is the command's answer, not a "
                "failure of the tool.",
            ),
        ),
        fork,
    ),
    Verb(
        _contract(
            "fork.list",
            "forks",
            ForksRequest,
            ForksResult,
            Effect.READ,
            "List this workspace's live universes: base, head, disk cost beyond what they "
            "share with it, paths changed since their base, and paths that collide.",
            (),
        ),
        forks,
    ),
    Verb(
        Contract(
            name="fork.remove",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.DESTRUCTIVE,
            request=ForkRemoveRequest,
            result=ForkRemoveResult,
            cli="fork-rm",
            errors=(
                InvalidForkNameError,
                ForkNotFoundError,
                NotTheForkError,
                ForkHasForksError,
                BusyError,
            ),
            validate=_validate_remove,
            needs_confirmation=_remove_needs_yes,
            preview=_remove_preview,
            confirmed=_remove_confirmed,
            tool=ToolSpec(
                name="workspace_fork_remove",
                hidden=("destination",),
                doc="Retire a universe: seal its last state (restorable by ID from here), then "
                "delete its folder (`keep_files: true` leaves it), and release the claims "
                "taken in it (`claims_released`, each a `released` event). A folder that is "
                "not the recorded fork is never removed.",
            ),
            doc="Retire a universe: seal its last state (restorable by ID from here), then "
            "delete its folder (--keep-files leaves it), and release the claims taken in it "
            "(`claims_released`, each a `released` event). Needs --yes; a folder that is not "
            "the recorded fork is never removed.",
        ),
        fork_remove,
    ),
    Verb(
        _contract(
            "fork.run",
            "run",
            RunRequest,
            ForkResult,
            Effect.WRITE,
            "Run a command in universe NAME (made first when it does not exist), then seal "
            "it; exits with the command's status. Interrupted (Ctrl-C, SIGTERM), it stops the "
            "command, seals the fork as it was and names it in the `interrupted` error's "
            "details.fork (name, path, base, head, port).",
            (*MAKE_ERRORS, ForkFolderMissingError, NotTheForkError),
            ToolSpec(
                doc="Run a command in universe `name` (made first when it does not exist), "
                "then seal it. Its exit status and the end of its output come back; a "
                "non-zero status is the command's answer, not a failure of the tool. Stopped "
                "before it ends, it stops the command, seals the fork as it was and names it "
                "in the `interrupted` error's details.fork (name, path, base, head, port).",
                docs=(
                    ("command", TOOL_COMMAND_DOC),
                    (
                        "at",
                        "make the fork of this stored snapshot (its whole ID; the fork must "
                        "not exist yet)",
                    ),
                ),
            ),
        ),
        run,
    ),
    Verb(
        _contract(
            "fork.exec",
            "exec",
            ExecRequest,
            ExecResult,
            Effect.WRITE,
            "Run a command in N new universes at once (NAME-1..NAME-N from one base), each "
            "sealed after; exits with the first non-zero status. --plan says what it would "
            "copy and creates nothing. Interrupted (Ctrl-C, SIGTERM), it stops every command, "
            "seals each universe made so far as it was and names them in the `interrupted` "
            "error's details.universes (name, path, base, head, port, exit_code).",
            MAKE_ERRORS,
            ToolSpec(
                limits=(ToolLimit("n", 1, MAX_UNIVERSES),),
                doc="Run a command in `n` new universes at once (`fork`-1 .. `fork`-N from one "
                "base), each sealed after; each one's exit status and the end of its output "
                "come back. `plan: true` says what it would copy and creates nothing. Stopped "
                "before they end, it stops every command, seals each universe made so far as "
                "it was and names them in the `interrupted` error's details.universes (name, "
                "path, base, head, port, exit_code).",
                docs=(
                    ("command", TOOL_COMMAND_DOC),
                    (
                        "at",
                        "make the universes of this stored snapshot (its whole ID) instead "
                        "of the live folder",
                    ),
                ),
            ),
        ),
        exec_,
    ),
)
