"""A folder a snapshot was written into, made exactly another snapshot in place
(`materialize.rematerialize`, each bisect probe after the first): whatever was done to it since
is put back, and only what differs is written.

Every test compares the folder, byte for byte and stat fact by stat fact (modes, mtimes of
files, folders and links, user xattrs, link counts), with the same snapshot written into a
fresh folder.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.helpers import make_project
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import find_workspace
from tillage.workspace.materialize import materialize, rematerialize


def exact(root: Path) -> dict[str, Any]:
    """Everything a check could tell about a folder: each name below it (`.tillage/` too)
    with its kind, mode, size, mtime, bytes or target, user xattrs and link count, and the
    folder's own mode."""
    out: dict[str, Any] = {"": stat.S_IMODE(os.lstat(root).st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames) + sorted(filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            xattrs = {k: os.getxattr(path, k, follow_symlinks=False) for k in _xattrs(path)}
            if stat.S_ISLNK(st.st_mode):
                body: Any = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                body = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                body = ("file", Path(path).read_bytes(), st.st_nlink)
            else:
                body = ("special",)  # never opened: a FIFO would block
            rel = os.path.relpath(path, root)
            out[rel] = (*body, stat.S_IMODE(st.st_mode), st.st_mtime_ns, xattrs)
    return out


def _xattrs(path: str) -> list[str]:
    try:
        return sorted(k for k in os.listxattr(path, follow_symlinks=False) if k.startswith("user."))
    except OSError:
        return []


def inodes(root: Path) -> dict[str, tuple[int, int]]:
    """Each file's inode and ctime: equal for a file that was not written again."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_ino, st.st_ctime_ns)
    return out


class Snapshots:
    """Two snapshots of a realistic project (git repo, .env, a SQLite database, a symlink, a
    read-only folder) that differ in a few files, and the store holding them."""

    def __init__(self, till: Till, folder: Path) -> None:
        make_project(folder)
        ro = folder / "ro"
        ro.mkdir()
        (ro / "kept.txt").write_text("read-only folder\n")
        ro.chmod(0o555)
        (folder / "big.bin").write_bytes(os.urandom(3 << 20))
        a = till.json("watch", "--no-daemon")["head"]["id"]
        (folder / "README.md").write_text("# demo, changed\n")
        (folder / "src" / "pkg" / "new.py").write_text("NEW = 1\n")
        (folder / "build" / "out.bin").unlink()
        with sqlite3.connect(folder / "dev.db") as db:
            db.execute("UPDATE users SET name = 'renamed' WHERE id < 10")
        db.close()
        b = till.json("snap", "-m", "b")["snapshot"]["id"]
        ws = find_workspace(till.home, folder)
        assert ws is not None
        self.store: Store = ws.store
        self.a, self.b = self.row(a), self.row(b)
        self.scratch = till.home.parent / "scratch"
        self.scratch.mkdir()

    def row(self, snapshot_id: str) -> SnapshotRow:
        row = self.store.snapshot(snapshot_id)
        assert row is not None
        return row

    def fresh(self, snapshot: SnapshotRow) -> dict[str, Any]:
        """The snapshot as materialize writes it into a new folder."""
        dest = self.scratch / f"fresh-{snapshot.id[:8]}"
        if not dest.exists():
            materialize(self.store, snapshot, dest)
        return exact(dest)


@pytest.fixture
def snaps(till: Till, folder: Path) -> Iterator[Snapshots]:
    yield Snapshots(till, folder)


def dirty(probe: Path) -> None:
    """What a check may do to the folder it runs in."""
    readme = probe / "README.md"
    before = readme.stat()
    readme.write_bytes(b"X" * before.st_size)  # same size, mtime put back: only ctime tells
    os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    (probe / "src" / "pkg" / "util.py").unlink()
    (probe / "created.txt").write_text("made by the check\n")
    (probe / "made" / "deep").mkdir(parents=True)
    (probe / "made" / "deep" / "x.txt").write_text("x\n")
    (probe / "run.sh").chmod(0o600)
    (probe / "src").chmod(0o700)
    probe.chmod(0o700)
    (probe / ".env").unlink()
    (probe / ".env").mkdir()  # a file replaced by a folder
    (probe / ".env" / "inside").write_text("in a folder now\n")
    (probe / "link_to_readme").unlink()
    (probe / "link_to_readme").symlink_to("run.sh")
    (probe / ".tillage").mkdir()  # as a `till init` in the probe would
    (probe / ".tillage" / "pointer").write_text("not ours\n")
    os.link(probe / "src" / "pkg" / "app.py", probe / "hard-link.py")
    os.setxattr(probe / "run.sh", "user.probe", b"set by the check")
    (probe / "big.bin").write_bytes(b"truncated")
    (probe / "empty_dir").rmdir()
    (probe / "ro").chmod(0o755)
    (probe / "ro" / "kept.txt").write_text("written in the read-only folder\n")
    (probe / "ro").chmod(0o555)
    (probe / "leftover.tillage-tmp-0").write_text("a temporary name\n")
    with sqlite3.connect(probe / "dev.db") as db:  # WAL mode: a header change and sidecars
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("INSERT INTO users(name) VALUES ('probe')")
        db.execute("DELETE FROM users WHERE name = 'probe'")
    db.close()
    (probe / "dev.db-shm").write_bytes(b"stray")


def test_a_dirtied_folder_is_made_exactly_the_next_snapshot(snaps: Snapshots) -> None:
    probe = snaps.scratch / "probe"
    rows = materialize(snaps.store, snaps.a, probe)
    assert exact(probe) == snaps.fresh(snaps.a)
    dirty(probe)

    rows2 = rematerialize(snaps.store, snaps.b, probe, rows)

    assert rows2 is not None
    assert exact(probe) == snaps.fresh(snaps.b)
    dirty(probe)  # and back, from what the last one returned
    rows3 = rematerialize(snaps.store, snaps.a, probe, rows2)
    assert rows3 is not None
    assert exact(probe) == snaps.fresh(snaps.a)


def test_the_same_snapshot_over_a_dirtied_folder_puts_back_only_what_was_dirtied(
    snaps: Snapshots,
) -> None:
    probe = snaps.scratch / "probe"
    rows = materialize(snaps.store, snaps.a, probe)
    before = inodes(probe)
    (probe / "created.txt").write_text("made by the check\n")
    (probe / "src" / "pkg" / "app.py").write_text("changed by the check\n")
    # What a reader killed in the middle leaves beside a database it did not change.
    (probe / "dev.db-wal").write_bytes(b"")
    (probe / "dev.db-shm").write_bytes(b"stray")

    again = rematerialize(snaps.store, snaps.a, probe, rows)

    assert again is not None
    assert exact(probe) == snaps.fresh(snaps.a)
    after = inodes(probe)
    assert after.keys() == before.keys()
    rewritten = {p for p in before if after[p] != before[p]}
    assert rewritten == {"src/pkg/app.py", "dev.db"}


def test_only_what_differs_between_the_snapshots_is_written(snaps: Snapshots) -> None:
    probe = snaps.scratch / "probe"
    rows = materialize(snaps.store, snaps.a, probe)
    before = inodes(probe)

    rows2 = rematerialize(snaps.store, snaps.b, probe, rows)

    assert rows2 is not None
    after = inodes(probe)
    kept = {p for p in before.keys() & after.keys() if before[p] == after[p]}
    assert "big.bin" in kept and "ro/kept.txt" in kept and "src/pkg/util.py" in kept
    assert kept.isdisjoint({"README.md", "dev.db"})  # what b changed
    assert "build/out.bin" not in after and "src/pkg/new.py" in after
    # The rows it returns are the folder's: a walk with them reads nothing, writes nothing.
    rematerialize(snaps.store, snaps.b, probe, rows2)
    assert inodes(probe) == after


def test_a_folder_that_cannot_be_vouched_for_is_left_alone_and_answered_none(
    snaps: Snapshots,
) -> None:
    probe = snaps.scratch / "probe"
    rows = materialize(snaps.store, snaps.a, probe)
    os.mkfifo(probe / "fifo")  # a special file: a walk does not capture it
    (probe / "created.txt").write_text("made by the check\n")
    listing = exact(probe)

    assert rematerialize(snaps.store, snaps.b, probe, rows) is None
    assert exact(probe) == listing  # nothing changed: the caller starts afresh

    (probe / "fifo").unlink()
    moved = snaps.scratch / "moved"
    probe.rename(moved)
    probe.symlink_to(moved)  # the folder replaced by a symlink: never followed
    assert rematerialize(snaps.store, snaps.b, probe, rows) is None
    assert (moved / "created.txt").exists()
    probe.unlink()
    assert rematerialize(snaps.store, snaps.b, probe, rows) is None  # gone


def test_a_grown_log_is_written_in_place_from_where_it_differs(till: Till, folder: Path) -> None:
    log = folder / "app.log"
    start = os.urandom(8 << 20)
    log.write_bytes(start)
    (folder / "rewritten.bin").write_bytes(os.urandom(2 << 20))
    a = till.json("watch", "--no-daemon")["head"]["id"]
    with log.open("ab") as f:
        f.write(os.urandom(256 << 10))
    (folder / "rewritten.bin").write_bytes(os.urandom(2 << 20))  # all of it differs
    b = till.json("snap", "-m", "b")["snapshot"]["id"]
    ws = find_workspace(till.home, folder)
    assert ws is not None
    store = ws.store
    row_a, row_b = store.snapshot(a), store.snapshot(b)
    assert row_a is not None and row_b is not None
    scratch = till.home.parent / "scratch"
    scratch.mkdir()
    fresh_a, fresh_b = scratch / "a", scratch / "b"
    materialize(store, row_a, fresh_a)
    materialize(store, row_b, fresh_b)
    probe = scratch / "probe"
    rows = materialize(store, row_a, probe)
    before = inodes(probe)

    grown = rematerialize(store, row_b, probe, rows)

    assert grown is not None
    assert exact(probe) == exact(fresh_b)
    after = inodes(probe)
    assert after["app.log"][0] == before["app.log"][0]  # the same file, written in place
    assert after["rewritten.bin"][0] != before["rewritten.bin"][0]  # written whole
    # And back: the log cut to its old length in place.
    shrunk = rematerialize(store, row_a, probe, grown)
    assert shrunk is not None
    assert exact(probe) == exact(fresh_a)
    assert inodes(probe)["app.log"][0] == before["app.log"][0]


def test_a_file_with_another_name_is_never_written_in_place(till: Till, folder: Path) -> None:
    (folder / "app.log").write_bytes(os.urandom(4 << 20))
    a = till.json("watch", "--no-daemon")["head"]["id"]
    with (folder / "app.log").open("ab") as f:
        f.write(b"one more line\n")
    b = till.json("snap", "-m", "b")["snapshot"]["id"]
    ws = find_workspace(till.home, folder)
    assert ws is not None
    row_a, row_b = ws.store.snapshot(a), ws.store.snapshot(b)
    assert row_a is not None and row_b is not None
    probe = till.home.parent / "probe"
    rows = materialize(ws.store, row_a, probe)
    outside = till.home.parent / "outside.log"
    os.link(probe / "app.log", outside)  # a check's hard link out of the folder
    kept = outside.read_bytes()

    assert rematerialize(ws.store, row_b, probe, rows) is not None

    assert outside.read_bytes() == kept  # not written through the other name
    assert (probe / "app.log").read_bytes() == (folder / "app.log").read_bytes()
    assert os.lstat(probe / "app.log").st_nlink == 1
