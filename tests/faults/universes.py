"""The universe kill campaign's prepared universes (test_universe_kill_campaign): the workload,
the operations and the phases a kill is aimed at, one World per operation put back between
kills, and the kill itself."""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.faults.campaign import describe_difference
from tests.faults.harness import (
    START_MARK,
    Killed,
    Manifest,
    Zygote,
    manifest,
    noise,
    write_state,
)

Spec = dict[str, Any]
Phases = dict[str, tuple[str | None, str | None]]

# -- the universe ------------------------------------------------------------------------------

DIRS, FILES = 6, 30
CHECK_SECONDS = 0.2  # the merge check takes a moment, so kills land while it runs


def _db(rows: int) -> bytes:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t(v) VALUES (?)", [(f"row {i}",) for i in range(rows)])
        conn.commit()
        return conn.serialize()
    finally:
        conn.close()


RUN_SH = b"#!/bin/sh\necho run\n"


def parent_spec() -> Spec:
    """~190 small files in six folders, a 512 KiB file, a database, a link, an exec bit, .env."""
    rng = random.Random(21)
    spec: Spec = {
        f"src/d{d}/f{f:02}.py": rng.randbytes(rng.randrange(64, 2048))
        for d in range(DIRS)
        for f in range(FILES)
    }
    spec["assets/blob.bin"] = noise(21, 512 * 1024)
    spec["data/app.db"] = _db(200)
    spec["run.sh"] = ("exec", RUN_SH)
    spec["link"] = ("link", "run.sh")
    spec[".env"] = b"SECRET=1\n"
    spec["empty"] = ("dir",)
    return spec


def work_in_fork(fork: Path, till: Till) -> None:
    """The fork's work: edits, a deletion, new files and a mode sealed in its timeline, then
    more edits, a new 256 KiB file and database rows left live (the merge seals them)."""
    for f in range(10):
        (fork / f"src/d1/f{f:02}.py").write_bytes(b"fork edit %d\n" % f)
    (fork / "src/d1/f29.py").unlink()
    for i in range(5):
        (fork / f"fork/new{i}.txt").parent.mkdir(exist_ok=True)
        (fork / f"fork/new{i}.txt").write_bytes(b"new in the fork %d\n" % i)
    (fork / "src/d1/f10.py").chmod(0o755)
    till.json("snap", "-m", "fork work", cwd=fork)
    for f in range(11, 20):
        (fork / f"src/d1/f{f:02}.py").write_bytes(b"live fork edit %d\n" % f)
    (fork / "assets/fork.bin").write_bytes(noise(22, 256 * 1024))
    (fork / "fork-added.txt").write_bytes(b"the check looks for me\n")
    conn = sqlite3.connect(fork / "data/app.db")
    try:
        conn.executemany("INSERT INTO t(v) VALUES (?)", [(f"fork {i}",) for i in range(50)])
        conn.commit()
    finally:
        conn.close()


LIVE_FORK_FILE = "src/d1/f11.py"  # a live edit of the fork: its last state holds it


def work_in_parent(parent: Path) -> None:
    """The parent's own live work, on other paths than the fork's."""
    for f in range(10):
        (parent / f"src/d2/f{f:02}.py").write_bytes(b"parent edit %d\n" % f)
    (parent / "src/d2/f29.py").unlink()
    (parent / "parent-new.txt").write_bytes(b"new in the parent\n")


def merged(base: Manifest, ours: Manifest, theirs: Manifest) -> Manifest:
    """The three-way result of two sides that changed different paths: theirs where it changed
    a path, ours elsewhere."""
    out: Manifest = {}
    for path in set(base) | set(ours) | set(theirs):
        theirs_changed = theirs.get(path) != base.get(path)
        assert not (theirs_changed and ours.get(path) != base.get(path)), f"both changed {path}"
        value = theirs.get(path) if theirs_changed else ours.get(path)
        if value is not None:
            out[path] = value
    return out


# -- the operations and their phases -----------------------------------------------------------

# A phase is (anchor, end): the kill moment is drawn between the anchor's pass ("NAME#N": its
# Nth) and the end's (None: the process's end). `anywhere` is the whole command.
ANYWHERE = (START_MARK, None)
MERGE_PHASES: Phases = {
    "anywhere": ANYWHERE,
    "opening": (START_MARK, "pack.after_write"),  # open, recover, the parent's walk
    "ours-seal": ("pack.after_write", "seal.after_publish"),  # pre_merge: the undo
    "theirs-seal": ("seal.after_publish", "seal.after_publish#2"),  # the fork's head
    "planning": ("seal.after_publish#2", "rewind.after_staging"),  # plan, tree, lock, drift
    "intent": ("rewind.after_staging", "rewind.after_intent"),
    "apply": ("rewind.after_intent", "merge.after_seal"),  # the paths land, the merge seal
    "telling": ("merge.after_seal", "rewind.before_intent_removed"),  # the fork_merged fact
    "finishing": ("rewind.before_intent_removed", None),
}
# With --check the merged result is first staged into the scratch copy (the first staging),
# where the check runs; the landing stages again.
CHECK_PHASES: Phases = {
    **{k: v for k, v in MERGE_PHASES.items() if k not in ("planning", "intent")},
    "planning": ("seal.after_publish#2", "rewind.after_staging"),  # plan, tree, the copy
    "check": ("rewind.after_staging", "rewind.after_staging#2"),  # the check, lock, drift
    "intent": ("rewind.after_staging#2", "rewind.after_intent"),
}
FORK_PHASES: Phases = {
    "anywhere": ANYWHERE,
    "opening": (START_MARK, "fork.after_intent"),  # finish, lock, checks, the intent
    "copy": ("fork.after_intent", "fork.after_copy"),  # the copy while the base is sealed
    "index": ("fork.after_copy", "fork.after_snapshot"),  # pointer, exact base, sync, snapshot
    "record": ("fork.after_snapshot", "fork.after_record"),
    "rename": ("fork.after_record", "fork.after_rename"),  # staging renamed into place
    "finishing": ("fork.after_rename", None),
}
REMOVE_PHASES: Phases = {
    "anywhere": ANYWHERE,
    "opening": (START_MARK, "pack.after_write"),  # finish, lock, count, the last walk
    "seal": ("pack.after_write", "seal.after_publish"),  # the last state
    "trash": ("seal.after_publish", "fork.remove.after_trash"),  # the folder renamed away
    "record": ("fork.remove.after_trash", "fork.remove.after_record"),
    "delete": ("fork.remove.after_record", None),  # the trash deleted
}
KEEP_PHASES: Phases = {
    "anywhere": ANYWHERE,
    "opening": (START_MARK, "pack.after_write"),
    "seal": ("pack.after_write", "seal.after_publish"),
    "record": ("seal.after_publish", "fork.remove.after_record"),
    "finishing": ("fork.remove.after_record", None),
}

MERGE_NEXT = (
    "status",
    "forks",
    "merge-again",
    "fork-other",
    "timeline",
    "radar",
    "verify",
    "rewind-undo",
)
FORK_NEXT = (
    "status",
    "forks",
    "fork-again",
    "fork-other",
    "merge",
    "timeline",
    "radar",
    "verify",
)
REMOVE_NEXT = (
    "status",
    "forks",
    "fork-rm-again",
    "fork-other",
    "merge",
    "timeline",
    "radar",
    "verify",
)
# The commands that finish what a killed fork or fork removal left (features/forks
# finish_pending): fork, forks, fork-rm (and run, exec).
FORK_COMMANDS = frozenset({"forks", "fork-again", "fork-other", "fork-rm-again"})


@dataclass(frozen=True)
class Op:
    """One operation of the campaign: its command line, its phases, the next commands drawn
    after a kill, and how many kills each (operation, next command) test runs."""

    name: str
    args: tuple[str, ...]
    phases: Phases
    nexts: tuple[str, ...]
    kills: int
    seed: int


def _check_command(log: Path) -> str:
    """Passes only in the merged result (the fork's new file is there), logs that it ran,
    and takes a moment."""
    return f"test -f fork-added.txt && echo ran >> {shlex.quote(str(log))} && sleep {CHECK_SECONDS}"


OPS = {
    "merge": Op("merge", ("merge", "k"), MERGE_PHASES, MERGE_NEXT, 8, 1),
    "merge-check": Op("merge-check", ("merge", "k", "--check"), CHECK_PHASES, MERGE_NEXT, 8, 2),
    "fork": Op("fork", ("fork", "k"), FORK_PHASES, FORK_NEXT, 8, 3),
    "fork-rm": Op("fork-rm", ("fork-rm", "k", "--yes"), REMOVE_PHASES, REMOVE_NEXT, 6, 4),
    "fork-rm-keep": Op(
        "fork-rm-keep", ("fork-rm", "k", "--yes", "--keep-files"), KEEP_PHASES, REMOVE_NEXT, 3, 5
    ),
}

# -- one prepared universe per operation -------------------------------------------------------


def _stamps(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry below `root` by relative path: its inode and ctime, which any write, chmod,
    rename or replacement moves."""
    out: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            out[os.path.relpath(os.path.join(folder, name), root)] = (st.st_ino, st.st_ctime_ns)
    return out


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


class Template:
    """A tree kept aside (`saved`) and put back at `live` as it was, cheaply: what a round did
    not touch (same inode, same ctime as when it was last put back) stays, what it touched is
    copied again, what it made is deleted. Deleting is what a disk mounted with online discard
    is slow at, and a round touches a few dozen of the universe's 400 files."""

    def __init__(self, saved: Path, live: Path) -> None:
        self.saved = saved
        self.live = live
        self.stamps: dict[str, tuple[int, int]] = {}

    def put_back(self) -> None:
        self._folder("")
        shutil.copystat(self.saved, self.live)
        self.stamps = _stamps(self.live)

    def _folder(self, rel: str) -> None:
        want = {e.name: e for e in os.scandir(self.saved / rel)}
        for entry in list(os.scandir(self.live / rel)):
            path = os.path.join(rel, entry.name)
            kept = want.get(entry.name)
            st = entry.stat(follow_symlinks=False)
            if kept is None or stat.S_IFMT(st.st_mode) != stat.S_IFMT(
                kept.stat(follow_symlinks=False).st_mode
            ):
                _remove(entry.path)
            elif stat.S_ISDIR(st.st_mode):
                self._folder(path)
                shutil.copystat(kept.path, entry.path, follow_symlinks=False)
            elif self.stamps.get(path) != (st.st_ino, st.st_ctime_ns):
                os.unlink(entry.path)
        for name, kept in want.items():
            target = self.live / rel / name
            if os.path.lexists(target):
                continue
            if kept.is_dir(follow_symlinks=False):
                shutil.copytree(kept.path, target, symlinks=True)
            else:
                shutil.copy2(kept.path, target, follow_symlinks=False)


@dataclass
class World:
    """An operation's universe at `live` (its store, its parent and fork folders), a copy of it
    as it was prepared (`template`), the states a user may find, the phases' measured lengths,
    and the zygote its commands are forked from."""

    op: Op
    base: Path
    till: Till
    zygote: Zygote
    states: dict[str, Manifest]
    windows: dict[str, float]
    parent_id: str
    fork_id: str  # the prepared fork's workspace ("" for the fork campaign: none is prepared)
    check_log: Path
    live_fork_bytes: bytes = b""
    saved: Template = field(init=False)

    def __post_init__(self) -> None:
        self.saved = Template(self.template, self.live)

    @property
    def live(self) -> Path:
        return self.base / "live"

    @property
    def template(self) -> Path:
        return self.base / "template"

    @property
    def parent(self) -> Path:
        return self.till.cwd

    @property
    def forks_dir(self) -> Path:
        return self.parent.parent / f"{self.parent.name}.forks"

    def fork_path(self, name: str = "k") -> Path:
        return self.forks_dir / name

    def args(self) -> list[str]:
        extra = [_check_command(self.check_log)] if self.op.name == "merge-check" else []
        return ["--json", *self.op.args, *extra]

    def restore(self) -> None:
        """Puts the universe back as it was prepared (same paths: the store names them)."""
        self.saved.put_back()

    def checks_run(self) -> int:
        return self.check_log.read_text().count("ran") if self.check_log.exists() else 0


def build_world(op: Op, base: Path, zygote: Zygote) -> World:
    """Prepares the universe for `op` at base/live, keeps a copy as the template, and times
    one uninterrupted run."""
    live = base / "live"
    user_home = live / "home"
    parent = user_home / "project"
    parent.mkdir(parents=True)
    till = Till(live / "store", user_home, parent)
    write_state(parent, parent_spec())
    sealed = manifest(parent)
    till.json("watch", "--no-daemon")
    parent_id = till.json("status")["id"]
    fork = parent.parent / f"{parent.name}.forks" / "k"
    states: dict[str, Manifest] = {}
    fork_id = ""
    if op.name == "fork":
        work_in_parent(parent)  # the base seal, run beside the copy, has work to do
        states["parent"] = manifest(parent)
    else:
        fork_id = till.json("fork", "k")["fork"]["workspace"]
        work_in_fork(fork, till)
        if op.name.startswith("merge"):
            work_in_parent(parent)
        states["parent"] = manifest(parent)
        states["fork"] = manifest(fork)
        states["merged"] = merged(sealed, states["parent"], states["fork"])
    world = World(
        op,
        base,
        till,
        zygote,
        states,
        {},
        parent_id,
        fork_id,
        base / "check.log",
        live_fork_bytes=(fork / LIVE_FORK_FILE).read_bytes() if fork.exists() else b"",
    )
    shutil.copytree(live, world.template, symlinks=True)
    timing = world.zygote.run(world.till, world.args())
    assert timing.returncode == 0, (timing.stdout, timing.stderr)
    for phase, (start, stop) in op.phases.items():
        for mark in (start, stop):
            assert mark is None or timing.passed(mark), f"{op.name}: {phase} never passes {mark}"
    if op.name.startswith("merge"):
        doc = json.loads(timing.stdout)
        assert doc["landed"] is True, doc
        now = manifest(parent)
        assert now == states["merged"], describe_difference(parent, states["merged"])
    world.windows = phase_lengths(timing, op.phases)
    world.restore()
    return world


def phase_lengths(run: Killed, phases: Phases) -> dict[str, float]:
    return {name: max(run.span(start, stop), 0.001) for name, (start, stop) in phases.items()}


# Where the universes live when it is a tmpfs with room for a few workers' (each holds ~35 MiB):
# a SIGKILL leaves the page cache as it was, so the campaign needs no disk, and the file took
# 47 s there against 65 s on an ext4 mounted with online discard (2 busy cores, -n 2).
FAST_TMP = Path("/dev/shm")
FAST_TMP_ROOM = 256 << 20


def fast_tmp() -> Path | None:
    """FAST_TMP when it is a writable tmpfs with FAST_TMP_ROOM free, else None (the test's own
    tmp folder then)."""
    try:
        with open("/proc/mounts") as mounts:
            tmpfs = any(
                line.split()[1] == str(FAST_TMP) and line.split()[2] == "tmpfs" for line in mounts
            )
        room = shutil.disk_usage(FAST_TMP).free >= FAST_TMP_ROOM
        writable = os.access(FAST_TMP, os.W_OK | os.X_OK)
    except OSError:
        return None
    return FAST_TMP if tmpfs and room and writable else None


# -- killing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """One round: the phase aimed at, whether the kill lands exactly at its first failpoint,
    the next command, and the seed of the moment."""

    phase: str
    exact: bool
    next: str
    seed: int


# A kill that came too late (the command finished first) is tried again this often, the
# universe put back, at another moment: each planned kill is a kill.
RETRIES = 3


def kill_in_phase(world: World, kill: Kill) -> tuple[Killed, int]:
    """Kills the operation in the phase: at its anchor, or a moment drawn in the phase's
    measured length after it. A run the kill missed measured every phase again: the shorter
    length is kept (so a slow timing run does not push later kills past their phase), and the
    kill is tried again."""
    anchor, _stop = world.op.phases[kill.phase]
    rng = random.Random(kill.seed)
    for attempt in range(RETRIES + 1):
        if attempt:
            world.restore()
        delay = 0.0 if kill.exact else rng.uniform(0, world.windows[kill.phase])
        killed = world.zygote.run(world.till, world.args(), anchor=anchor, kill_after=delay)
        if killed.returncode != 0:
            break
        for name, length in phase_lengths(killed, world.op.phases).items():
            if length > 0.001:
                world.windows[name] = min(world.windows[name], length)
    return killed, attempt + 1


def where_it_landed(world: World, killed: Killed, attempts: int, checks_before: int) -> str:
    if killed.returncode == 0:
        return f"nowhere: it finished first {attempts} times"
    if killed.returncode != -9:
        return f"nowhere: exit {killed.returncode}"
    where = f"after {killed.last()}"
    if attempts > 1:
        where += f" (at attempt {attempts})"
    checked = world.op.name == "merge-check" and world.checks_run() > checks_before
    if checked and not killed.passed("rewind.after_staging#2"):
        where += ", while the check ran"
    return where
