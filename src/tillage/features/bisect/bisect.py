"""`till bisect`: the first snapshot where a check fails, each probe in a disposable copy.

The range is the bad snapshot's first-parent line back to the good one (a merge's second parent
is not followed, like `git bisect --first-parent`): the workspace's timeline in the order it was
sealed. The ends are checked first (good must pass, bad must fail), then core.bisect picks the
probes. Each probe runs in one folder of a probe area under the store's tmp dir: the first
snapshot is written into it from the store (materialize), and for each next probe the same
folder is made exactly that snapshot in place (rematerialize): a stat walk finds what the check
changed there, and only that and what differs between the two snapshots is written (the
standard workload's probe: see bench/bisect_probes.py).

The workspace is never touched: nothing is read from it but the seal of its present state when
no --bad is given (that seal changes no file). The probe area is held under a lock for as long
as the bisect runs and removed when it ends, however it ends (an error, Ctrl-C, SIGTERM); one
left behind by a killed process (its lock is free then) is removed by the next bisect.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tillage.core.bisect import Search, Verdict, verdict_of
from tillage.core.progress import PAUSE, ProgressFn, relabel
from tillage.errors import InvalidArgumentError
from tillage.features.bisect.errors import (
    BisectAbortedError,
    BisectBadPassesError,
    BisectGoodFailsError,
    BisectRangeError,
    BisectUntestableEndError,
)
from tillage.platform.folders import remove_tree
from tillage.platform.launch import Launch
from tillage.platform.locks import file_lock, is_held
from tillage.platform.names import random_hex
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.pathindex import Row

AREA_PREFIX = "bisect-"
LOCK_SUFFIX = ".lock"
OUTPUT_CAP = 4096  # bytes of each probe's output kept in the result (the tail)
SEAL_LABEL = "before bisect"
STALE_LOCK_S = 600.0


@dataclass(frozen=True)
class Probe:
    """One run of the check on one snapshot."""

    snapshot: SnapshotRow
    exit_code: int
    verdict: Verdict | None  # None: the check aborted the bisect
    output: str
    seconds: float


@dataclass(frozen=True)
class Bisected:
    """Where the bisect ended.

    `outcome`: "found" (first_bad is the first snapshot that fails, last_good right before it),
    "only_skipped_left" (the first bad one is among `candidates`: the check skipped the others),
    or "limit_reached" (--limit stopped it; the first bad one is among `candidates`). Only
    "found" proves a culprit: otherwise first_bad is None and the narrowed range is
    last_good..bad."""

    # The first snapshot that fails, only when proven (outcome "found").
    first_bad: SnapshotRow | None
    # The newest snapshot seen to pass.
    last_good: SnapshotRow
    # The oldest snapshot seen to fail: first_bad when found, else the range's bad end.
    bad: SnapshotRow
    probes: tuple[Probe, ...]
    outcome: str
    candidates: tuple[SnapshotRow, ...]
    # Snapshots between the two ends when the search began (both ends included).
    range_size: int
    # The workspace's present, sealed because --bad was not given (None when it was, or when
    # the head already was the present).
    sealed: SnapshotRow | None
    steps_left: int


def bisect(
    ws: Workspace,
    command: tuple[str, ...],
    *,
    good: str | None = None,
    bad: str | None = None,
    limit: int | None = None,
    launch: Launch | None = None,
    on_progress: ProgressFn | None = None,
) -> Bisected:
    """Finds the first snapshot between `good` (default: the oldest of the line) and `bad`
    (default: the workspace's present, sealed first) where `command` fails. `on_progress`
    hears each probe's folder being written, a stage a probe (`probe 3: 3f9a0c1d2e4b`), and
    a pause before its check runs (the check's output is the person's to read)."""
    from tillage.platform.commands import argv_of
    from tillage.workspace.timeline import resolve

    argv_of(command)  # an empty command is invalid_argument, before anything is sealed
    if limit is not None and limit < 2:
        raise InvalidArgumentError(
            "--limit must be at least 2: both ends are checked before the search",
            next_step="give --limit 2 or more, or leave it out",
        )
    good_row = resolve(ws, good) if good is not None else None
    bad_row = resolve(ws, bad) if bad is not None else None
    sealed: SnapshotRow | None = None
    if bad_row is None:
        bad_row, sealed = _present(ws)
    line = first_parent_line(ws.store, ws.id, bad_row, good_row.id if good_row else None)
    if len(line) < 2:
        raise BisectRangeError(
            "there is only one snapshot to test: a bisect needs a good and a bad end",
            next_step="seal the good state and the bad one (`till snap`), then bisect",
        )
    probes: list[Probe] = []
    with probe_area(ws.store, ws.root.name) as run:

        def probe(row: SnapshotRow) -> Probe:
            stage = f"probe {len(probes) + 1}: {row.id[:12]}"
            done = run(row, command, launch, relabel(on_progress, stage))
            probes.append(done)
            if done.verdict is None:
                raise BisectAbortedError(
                    f"the check exited {done.exit_code} on {row.id[:12]} (above 127 or killed"
                    "): bisect stopped",
                    details=_details(done, probes),
                )
            return done

        _check_ends(probe, line[0], line[-1], probes)
        search = Search.start(len(line))
        while (position := search.next_probe()) is not None:
            if limit is not None and len(probes) >= limit:
                break
            search = search.record(position, _verdict(probe(line[position])))
    if search.finished:
        outcome = "found" if search.exact else "only_skipped_left"
    else:
        outcome = "limit_reached"
    return Bisected(
        first_bad=line[search.bad] if outcome == "found" else None,
        last_good=line[search.good],
        bad=line[search.bad],
        probes=tuple(probes),
        outcome=outcome,
        candidates=tuple(line[p] for p in search.candidates()),
        range_size=len(line),
        sealed=sealed,
        steps_left=0 if search.finished else max(1, search.steps_left()),
    )


def _verdict(done: Probe) -> Verdict:
    assert done.verdict is not None  # probe() raised otherwise
    return done.verdict


def _check_ends(
    probe: Callable[[SnapshotRow], Probe], good: SnapshotRow, bad: SnapshotRow, probes: list[Probe]
) -> None:
    """Good must pass and bad must fail before anything between them is run."""
    for row, wanted in ((good, Verdict.GOOD), (bad, Verdict.BAD)):
        done = probe(row)
        if done.verdict is wanted:
            continue
        end = "good" if wanted is Verdict.GOOD else "bad"
        if done.verdict is Verdict.SKIP:
            raise BisectUntestableEndError(
                f"the check cannot test the {end} end {row.id[:12]} (it exited 125, skip)",
                details=_details(done, probes),
            )
        if wanted is Verdict.GOOD:
            raise BisectGoodFailsError(
                f"the good end {row.id[:12]} fails the check (exit {done.exit_code})",
                details=_details(done, probes),
            )
        raise BisectBadPassesError(
            f"the bad end {row.id[:12]} passes the check (exit 0)",
            details=_details(done, probes),
        )


def _details(done: Probe, probes: list[Probe]) -> dict[str, object]:
    """What an error carries: the probe that stopped the bisect, and every probe run."""
    return {
        "snapshot": done.snapshot.id,
        "exit_code": done.exit_code,
        "output": done.output,
        "probes": [
            {
                "snapshot": p.snapshot.id,
                "exit_code": p.exit_code,
                "verdict": None if p.verdict is None else str(p.verdict),
            }
            for p in probes
        ],
    }


def _present(ws: Workspace) -> tuple[SnapshotRow, SnapshotRow | None]:
    """The workspace's present as a snapshot: the head when nothing changed, else a new seal
    (trigger manual; sealing reads the folder and writes only to the store)."""
    from tillage.workspace.seal import SealOptions, seal_result

    sealed = seal_result(ws, SealOptions(trigger="manual", label=SEAL_LABEL, skip_unchanged=True))
    return sealed.row, sealed.row if sealed.added else None


def first_parent_line(
    store: Store, workspace_id: str, bad: SnapshotRow, good_id: str | None
) -> list[SnapshotRow]:
    """The snapshots from `good_id` (default: the oldest reachable) to `bad`, oldest first,
    following first parents back from `bad`; BisectRangeError when good is not on that line."""
    if good_id == bad.id:
        raise BisectRangeError(f"--good and --bad are the same snapshot {bad.id[:12]}")
    own = {row.id: row for row in store.snapshots(workspace_id)}
    line = [bad]
    current = bad
    while current.id != good_id and current.parent is not None:
        parent = own.get(current.parent) or store.snapshot(current.parent)
        if parent is None:
            break
        line.append(parent)
        current = parent
    if good_id is not None and current.id != good_id:
        raise BisectRangeError(
            f"{good_id[:12]} is not an ancestor of {bad.id[:12]}: it is not on the bad "
            "snapshot's timeline before it"
        )
    line.reverse()
    return line


ProbeRunner = Callable[[SnapshotRow, tuple[str, ...], Launch | None, ProgressFn | None], Probe]


@contextlib.contextmanager
def probe_area(store: Store, folder_name: str) -> Iterator[ProbeRunner]:
    """A locked folder under the store's tmp dir for this bisect's probes, removed on the way
    out whatever happens; yields the function that runs one probe in it."""
    sweep_stale_areas(store)
    token = random_hex(8)
    path = store.tmp_dir / f"{AREA_PREFIX}{token}"
    lock = store.tmp_dir / f"{AREA_PREFIX}{token}{LOCK_SUFFIX}"
    try:
        with file_lock(lock, timeout=1.0, what="a bisect's probe area"):
            area = _Area(store, path, folder_name)
            try:
                path.mkdir(parents=True)
                yield area.run
            finally:
                area.close()
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


class _Area:
    """One bisect's probe folder, used for every probe: the first is the snapshot written out
    whole (materialize), each next one the same folder made exactly its snapshot in place
    (rematerialize: what the check changed is found by a stat walk and put back, and only
    what differs between the two snapshots is written). A folder that cannot be vouched for
    (replaced, or something in it unreadable) is set aside, removed on a worker thread while
    a fresh one is written; close() waits for those and removes what is left."""

    def __init__(self, store: Store, path: Path, folder_name: str) -> None:
        self.store = store
        self.path = path
        self.folder_name = folder_name
        self.removers: list[threading.Thread] = []
        # The probe folder's rows (what was written, as a seal's path index) and identity
        # (st_dev, st_ino), once it exists.
        self.rows: dict[str, Row] | None = None
        self.identity: tuple[int, int] | None = None

    def run(
        self,
        row: SnapshotRow,
        command: tuple[str, ...],
        launch: Launch | None,
        on_progress: ProgressFn | None = None,
    ) -> Probe:
        """Makes the probe folder (named as the workspace) exactly `row`, runs the check
        there."""
        from tillage.platform.commands import run_command

        dest = self.path / self.folder_name
        self._prepare(row, dest, on_progress)
        if on_progress is not None:
            on_progress(PAUSE)
        started = time.monotonic()
        outcome = run_command(
            command,
            dest,
            env={"TILLAGE_BISECT_SNAPSHOT": row.id},
            launch=launch,
            cap=OUTPUT_CAP,
        )
        seconds = time.monotonic() - started
        return Probe(
            snapshot=row,
            exit_code=outcome.exit_code,
            verdict=verdict_of(outcome.exit_code),
            output=outcome.output,
            seconds=seconds,
        )

    def _prepare(self, row: SnapshotRow, dest: Path, on_progress: ProgressFn | None) -> None:
        """The folder as `row`, byte-exact: the last probe's folder made so in place when it
        is still the folder written and can be vouched for, else a fresh one."""
        from tillage.workspace.materialize import materialize, rematerialize

        rows, self.rows = self.rows, None
        if rows is not None and self._same_folder(dest):
            try:
                self.rows = rematerialize(self.store, row, dest, rows, on_progress)
            except OSError:
                self.rows = None  # in an unknown state: start afresh
            if self.rows is not None:
                return
        self._discard(dest)
        self.identity = None
        self.rows = materialize(self.store, row, dest, durable=False, on_progress=on_progress)
        st = os.lstat(dest)
        self.identity = (st.st_dev, st.st_ino)

    def _same_folder(self, dest: Path) -> bool:
        """Whether `dest` is still the folder this area wrote (a check may replace it)."""
        try:
            st = os.lstat(dest)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def _discard(self, dest: Path) -> None:
        trash = self.path / f".done-{len(self.removers)}"
        try:
            os.rename(dest, trash)
        except FileNotFoundError:
            return  # nothing was made
        except OSError:
            _remove(dest)
            return
        worker = threading.Thread(
            target=_remove_quietly, args=(trash,), name="bisect-remove", daemon=True
        )
        worker.start()
        self.removers.append(worker)

    def close(self) -> None:
        for worker in self.removers:
            worker.join()
        _remove(self.path)


def _remove_quietly(path: Path) -> None:
    """A worker's removal: what it cannot remove, close() (or the next bisect) does."""
    with contextlib.suppress(OSError):
        _remove(path)


def _remove(path: Path) -> None:
    """Removes a probe folder and all in it (read-only folders included); a check that left a
    process behind still writing in it gets a few more tries."""
    for attempt in range(5):
        try:
            parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return
        try:
            remove_tree(parent, path.name)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
        finally:
            os.close(parent)


def sweep_stale_areas(store: Store) -> None:
    """Removes probe areas whose bisect is gone (a killed process: its lock is free)."""
    try:
        names = os.listdir(store.tmp_dir)
    except FileNotFoundError:
        return
    for name in names:
        if not name.startswith(AREA_PREFIX):
            continue
        if name.endswith(LOCK_SUFFIX):
            _drop_stale_lock(store.tmp_dir / name)
            continue
        lock = store.tmp_dir / f"{name}{LOCK_SUFFIX}"
        if is_held(lock):
            continue
        with contextlib.suppress(OSError):
            _remove(store.tmp_dir / name)
            lock.unlink(missing_ok=True)


def _drop_stale_lock(lock: Path) -> None:
    """A lock file left without its area (a process killed between the two removals), once it
    is old enough that no bisect can be starting with it."""
    area = lock.with_name(lock.name[: -len(LOCK_SUFFIX)])
    with contextlib.suppress(OSError):
        if area.exists() or is_held(lock):
            return
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
