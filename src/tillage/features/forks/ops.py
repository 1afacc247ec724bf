"""Using universes: running a command in one (`run`), in several at once (`exec`), planning
that (`exec --plan`), and retiring one (`fork-rm`: its last state sealed first, its folder
removed only when it really is that fork)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.core.progress import PAUSE, ProgressFn
from tillage.errors import InvalidArgumentError, echo
from tillage.features.forks import interrupted
from tillage.features.forks.copy import copy_skip
from tillage.features.forks.errors import ForkExistsError, ForkHasForksError, NotTheForkError
from tillage.features.forks.fork import (
    Forked,
    _remove_folder,
    check_name,
    create_fork,
    default_destination,
    ensure_port,
    finish_pending,
    forks_lock,
    is_fork_folder,
    open_fork,
    removal_intent,
    require_fork,
    require_fork_folder,
    trash_path,
)
from tillage.features.forks.ports import port_base
from tillage.platform import failpoints
from tillage.platform.clone import plan_tree, probe, rename_noreplace
from tillage.platform.commands import (
    CommandOutcome,
    argv_of,
    run_command,
    stop_group,
)
from tillage.platform.fs import atomic_write, fsync_dir
from tillage.platform.launch import Launch
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.workspace.attach import Workspace

MAX_UNIVERSES = 64
EXEC_PREFIX = "exec"


@dataclass(frozen=True)
class Ran:
    """A command that ran in a universe: the fork (with its port), its base and head after
    the seal, the command's status and output, its position in its batch (1..count, as
    TILLAGE_FORK_INDEX and TILLAGE_FORK_COUNT told it), and the copy's facts when the fork
    was made for it."""

    row: ForkRow
    base: str
    head: SnapshotRow | None
    exit_code: int
    output: str
    index: int
    made: Forked | None
    count: int = 1


@dataclass(frozen=True)
class ExecPlan:
    """What `exec` would do: the driver, how many universes, and per universe the files and
    bytes copied; `extra_disk_bytes` estimates what they add on disk (about nothing for
    reflinks)."""

    driver: str
    count: int
    files: int
    bytes: int
    total_bytes: int
    extra_disk_bytes: int


@dataclass(frozen=True)
class Removed:
    """A retired fork: its last state (sealed first), how many files its folder held when
    it was removed (0 with keep_files or a folder already gone), and whether anything changed
    (False for a dry run)."""

    row: ForkRow
    snapshot: SnapshotRow | None
    files_removed: int
    removed: bool
    kept_files: bool
    folder: str | None


def universe_env(row: ForkRow, index: int, count: int) -> dict[str, str]:
    """The environment a command gets in a universe: the fork's name and folder, its place
    in its batch (TILLAGE_FORK_INDEX, 1..TILLAGE_FORK_COUNT: `exec -n N` runs N, `run` one)
    and the fork's own port (PORT: no live fork of its family holds it), so parallel dev
    servers do not collide and a batch can split its work."""
    env = {
        "TILLAGE_FORK": row.name,
        "TILLAGE_FORK_INDEX": str(index),
        "TILLAGE_FORK_COUNT": str(count),
        "TILLAGE_FORK_PATH": row.root,
    }
    if row.port is not None:
        env["PORT"] = str(row.port)
    return env


def _cwd_in(ws: Workspace, fork_root: Path, caller: Path | None) -> Path:
    """The caller's sub-folder of the workspace, in the fork (its root when there is none)."""
    if caller is None:
        return fork_root
    try:
        rel = caller.resolve().relative_to(ws.root)
    except ValueError:
        return fork_root
    inside = fork_root / rel
    return inside if inside.is_dir() else fork_root


def _label(command: tuple[str, ...], *, cut: bool = False) -> str:
    text = " ".join(command)
    label = f"after `{text[:60]}{'...' if len(text) > 60 else ''}`"
    return label + " (interrupted)" if cut else label


def _seal_after(fork_ws: Workspace, command: tuple[str, ...]) -> SnapshotRow:
    from tillage.workspace.seal import SealOptions, seal

    return seal(fork_ws, SealOptions(trigger="fork", label=_label(command), skip_unchanged=True))


def run_in_fork(
    ws: Workspace,
    name: str,
    command: tuple[str, ...],
    *,
    at: str | None = None,
    create: bool | None = None,
    destination: Path | None = None,
    caller: Path | None = None,
    launch: Launch | None = None,
    on_progress: ProgressFn | None = None,
) -> Ran:
    """Runs `command` in the fork `name` (made first when it does not exist, of the live
    folder or of snapshot `at`; `create` True insists on making it, as `fork NAME -- CMD`
    does), then seals the fork (trigger `fork`). The command's failure is its status, not an
    error. Interrupted, it stops the command, seals the fork as it was and names it in the
    interruption (features/forks/interrupted.py). `on_progress` hears the fork's copy, then
    a pause before the command prints."""
    argv_of(command)  # an empty command is refused before anything is made
    check_name(name)
    base_port = port_base(launch)
    finish_pending(ws)
    row = ws.store.fork_named(ws.id, name)
    if row is not None and (at is not None or create):
        raise ForkExistsError.named(name, "; --at makes a new one" if at is not None else "")
    try:
        return _run_in(
            ws, name, row, command, at, destination, caller, launch, base_port, on_progress
        )
    except KeyboardInterrupt as exc:
        interrupted.note_fork(
            exc, interrupted.keep_universes(ws, [name], _label(command, cut=True), {})
        )
        raise


def _run_in(
    ws: Workspace,
    name: str,
    row: ForkRow | None,
    command: tuple[str, ...],
    at: str | None,
    destination: Path | None,
    caller: Path | None,
    launch: Launch | None,
    base_port: int,
    on_progress: ProgressFn | None = None,
) -> Ran:
    made: Forked | None = None
    if row is None:
        made = create_fork(
            ws, name, destination=destination, at=at, port_base=base_port, on_progress=on_progress
        )
        row = made.row
        fork_ws = made.workspace
        if on_progress is not None:
            on_progress(PAUSE)  # the command's output starts on a line of its own
    else:
        require_fork_folder(ws.store, row)
        row = ensure_port(ws.store, row, base_port)
        fork_ws = open_fork(ws, row)
    outcome = run_command(
        command,
        _cwd_in(ws, fork_ws.root, caller),
        env=universe_env(row, 1, 1),
        launch=launch,
    )
    head = _seal_after(fork_ws, command)
    return Ran(row, row.base, head, outcome.exit_code, outcome.output, 1, made)


def exec_names(ws: Workspace, count: int, prefix: str | None) -> list[str]:
    """`count` free universe names `PREFIX-1`, `PREFIX-2`, ... (default prefix `exec`),
    skipping names a live fork has or whose default folder exists."""
    if not 1 <= count <= MAX_UNIVERSES:
        raise InvalidArgumentError(f"-n must be between 1 and {MAX_UNIVERSES}, not {count}")
    stem = check_name(prefix or EXEC_PREFIX)
    names: list[str] = []
    i = 0
    while len(names) < count:
        i += 1
        name = check_name(f"{stem}-{i}")
        if ws.store.fork_named(ws.id, name) is None and not os.path.lexists(
            default_destination(ws, name)
        ):
            names.append(name)
    return names


def plan_exec(ws: Workspace, count: int) -> ExecPlan:
    """What `exec -n COUNT` would copy and by which driver; creates nothing."""
    if not 1 <= count <= MAX_UNIVERSES:
        raise InvalidArgumentError(f"-n must be between 1 and {MAX_UNIVERSES}, not {count}")
    where = default_destination(ws, "x").parent
    while not where.is_dir():
        where = where.parent
    driver = probe(ws.root, where)
    files, size = plan_tree(ws.root, skip=copy_skip(ws))
    extra = 0 if driver == "reflink" else size * count
    return ExecPlan(driver, count, files, size, size * count, extra)


def exec_universes(
    ws: Workspace,
    command: tuple[str, ...],
    *,
    count: int,
    prefix: str | None = None,
    at: str | None = None,
    caller: Path | None = None,
    launch: Launch | None = None,
) -> list[Ran]:
    """Makes `count` universes from ONE base (a seal of the live folder, or snapshot `at`),
    runs `command` in all of them at once, then seals each; returns them in order.
    Interrupted, it stops every command, seals each universe made so far as it was and names
    them in the interruption (features/forks/interrupted.py)."""
    argv_of(command)
    base_port = port_base(launch)
    finish_pending(ws)
    names = exec_names(ws, count, prefix)
    exits: dict[str, int] = {}
    try:
        return _exec_in(ws, command, names, at, caller, launch, base_port, exits)
    except KeyboardInterrupt as exc:
        label = _label(command, cut=True)
        interrupted.note_universes(exc, interrupted.keep_universes(ws, names, label, exits))
        raise


def _exec_in(
    ws: Workspace,
    command: tuple[str, ...],
    names: list[str],
    at: str | None,
    caller: Path | None,
    launch: Launch | None,
    base_port: int,
    exits: dict[str, int],
) -> list[Ran]:
    """exec_universes' work; `exits` gets each command's status as it ends (an interrupted
    exec reports the ones that did)."""
    from tillage.workspace.seal import SealOptions, seal_result
    from tillage.workspace.timeline import resolve

    count = len(names)
    if at is not None:
        base = resolve(ws, at)
    else:
        base = seal_result(
            ws,
            SealOptions(
                trigger="fork_base", label=f"base of {count} universes", skip_unchanged=True
            ),
        ).row
    made = [
        create_fork(ws, name, at=at, base=None if at else base, port_base=base_port)
        for name in names
    ]
    outcomes: list[CommandOutcome | None] = [None] * len(made)
    failures: list[BaseException] = []
    running: set[int] = set()
    stopping: list[bool] = []  # set when interrupted: a command that starts after is stopped

    def started(pgid: int) -> None:
        # Its pid is known only once Popen returns, after the command may have run a while:
        # an interrupt between the two must still reach it.
        running.add(pgid)
        if stopping:
            stop_group(pgid)

    def run(i: int) -> None:
        # Threads run the commands only: the store is used from this thread alone.
        try:
            outcome = run_command(
                command,
                _cwd_in(ws, made[i].workspace.root, caller),
                env=universe_env(made[i].row, i + 1, len(made)),
                launch=launch,
                on_start=started,
            )
            outcomes[i] = outcome
            exits[made[i].row.name] = outcome.exit_code
        except BaseException as exc:
            failures.append(exc)

    # Each thread runs in a copy of this context, so a cancellable call's cancel reaches every
    # universe's command (platform/commands.cancellable).
    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(run, i), daemon=True)
        for i in range(len(made))
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:
        stopping.append(True)
        for pgid in list(running):  # interrupted: no universe's command outlives us
            stop_group(pgid)
        give_up = time.monotonic() + 5  # a thread between Popen and on_start stops its own
        for t in threads:
            t.join(timeout=max(0.0, give_up - time.monotonic()))
        raise
    if failures:
        raise failures[0]
    ran: list[Ran] = []
    for index, (forked, outcome) in enumerate(zip(made, outcomes, strict=True), start=1):
        assert outcome is not None
        head = _seal_after(forked.workspace, command)
        ran.append(
            Ran(
                forked.row,
                forked.base.id,
                head,
                outcome.exit_code,
                outcome.output,
                index,
                forked,
                len(made),
            )
        )
    return ran


def check_expected_root(row: ForkRow, expected: Path | None) -> None:
    """Refuses (not_the_fork, nothing touched) when the caller expects the fork somewhere
    other than its recorded folder: a stale name must never remove another fork."""
    if expected is None:
        return
    want = Path(os.path.abspath(expected))
    with contextlib.suppress(OSError):
        want = want.parent.resolve() / want.name
    if want != Path(row.root):
        raise NotTheForkError(
            f"fork {row.name!r} is at {row.root}, not at {want}: nothing was removed",
            details={"path": row.root, "expected": str(want)},
        )


def remove_fork(
    ws: Workspace,
    name: str,
    *,
    keep_files: bool,
    dry_run: bool = False,
    stop_watcher: Callable[[str], object] | None = None,
    expected_root: Path | None = None,
) -> Removed:
    """Retires the fork `name`: seals its last state (trigger `fork`), stops its watcher,
    removes its folder (unless `keep_files`) and publishes `fork_removed`; its timeline stays
    in the store, so the last state is restorable by ID from the parent.

    The folder goes only when it is that fork (its own pointer): anything else there is
    refused with not_the_fork and nothing is touched. Crash-safe: the folder is first renamed
    to a trash name beside it (one rename), then the record is published, then the trash is
    deleted; the next fork command puts back or finishes what a killed removal left.
    `stop_watcher(fork_id)` stops the fork's watcher first (the watch layer's business);
    `expected_root`, when given, must be the fork's recorded folder (see check_expected_root).
    """
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import SealOptions, seal_result_locked

    finish_pending(ws)
    store = ws.store
    with forks_lock(ws):
        row = require_fork(ws, name)
        check_expected_root(row, expected_root)
        root = Path(row.root)
        present = os.path.lexists(root)
        is_fork = present and is_fork_folder(store, row)
        if present and not is_fork and not keep_files:
            raise NotTheForkError(
                f"{root} is not fork {name!r} any more (its `.tillage` pointer names another "
                "workspace, or none): nothing was removed",
                details={"path": str(root)},
            )
        children = store.forks_of(row.workspace)
        if children:
            raise ForkHasForksError(
                f"fork {name!r} has {len(children)} live fork(s) of its own: "
                + ", ".join(c.name for c in children)
            )
        delete = is_fork and not keep_files
        files = plan_tree(root, skip=lambda rel: rel == CONTROL_DIR)[0] if delete else 0
        if dry_run:
            return Removed(row, store.head(row.workspace), files, False, keep_files, row.root)
        fork_ws = open_fork(ws, row)
        if is_fork and stop_watcher is not None:
            stop_watcher(row.workspace)
        last: SnapshotRow | None
        with workspace_lock(fork_ws):
            if is_fork:
                last = seal_result_locked(
                    fork_ws,
                    SealOptions(
                        trigger="fork", label=f"last state of fork {name}", skip_unchanged=True
                    ),
                ).row
            else:
                last = store.head(row.workspace) or store.snapshot(row.base)
            trash = trash_path(root, row.workspace)
            intent = removal_intent(store, row)
            if delete:
                atomic_write(intent, json.dumps({"parent": row.parent}).encode())
                rename_noreplace(root, trash)
                fsync_dir(root.parent)
                failpoints.hit("fork.remove.after_trash")
            store.publish(
                "fork_removed",
                {
                    "workspace": row.workspace,
                    "parent": row.parent,
                    "name": row.name,
                    "snapshot": last.id if last is not None else None,
                },
            )
            failpoints.hit("fork.remove.after_record")
            if delete:
                _remove_folder(trash)
                intent.unlink(missing_ok=True)
    return Removed(row, last, files, True, keep_files, row.root)


def describe_command(command: tuple[str, ...]) -> str:
    """The command as one line for messages."""
    return echo(" ".join(command))
