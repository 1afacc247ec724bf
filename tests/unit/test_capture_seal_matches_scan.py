"""What a seal stores must not change what it captures: the same folder gives the same trees
whether the walk stores them (a seal, compressing on the writer's threads) or only computes
their IDs (a scan for `diff`), and every object the trees reach is in the store."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from tillage.core import codec
from tillage.core.models import ContentKind, EntryFlag
from tillage.store.store import Store
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import Policy


def _make_tree(root: Path) -> None:
    """Many folders and files (more than one compression batch), empty and duplicate files,
    xattrs, a hard link, a symlink and a small SQLite database."""
    for d in range(40):
        sub = root / f"pkg{d:02d}" / "lib"
        sub.mkdir(parents=True)
        for f in range(12):
            (sub / f"m{f}.py").write_text(f"# module {d}.{f}\n" * (f * 50 + 1))
        (sub / "LICENSE").write_text("same text in every package\n")
        (sub / "empty").write_bytes(b"")
    flat = root / "flat"
    flat.mkdir()
    for f in range(300):
        (flat / f"f{f:03d}.txt").write_bytes(os.urandom(f * 37))
    os.setxattr(flat / "f001.txt", "user.note", b"kept")
    os.link(flat / "f002.txt", root / "linked.txt")
    os.symlink("flat/f003.txt", root / "shortcut")
    with sqlite3.connect(root / "small.db") as db:
        db.execute("CREATE TABLE t(x)")
        db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    db.close()


def _capture(root: Path, home: Path, *, store_it: bool) -> Capture:
    store = Store.open(home)
    try:
        started = time.time_ns()
        if not store_it:
            return Walker(root, Policy([]), PathIndex(), None, store.tmp_dir, started).run()
        with store.writer() as writer:
            capture = Walker(root, Policy([]), PathIndex(), writer, store.tmp_dir, started).run()
            writer.commit()
        return capture
    finally:
        store.close()


def test_a_seal_gives_the_trees_of_a_scan_that_stores_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _make_tree(root)

    sealed = _capture(root, tmp_path / "store", store_it=True)
    scanned = _capture(root, tmp_path / "store", store_it=False)

    assert sealed.root == scanned.root
    assert sealed.dirs == scanned.dirs
    assert sealed.files == scanned.files == 40 * 14 + 300 + 3
    assert not sealed.notes


def test_a_seal_stores_every_object_its_trees_reach(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _make_tree(root)
    home = tmp_path / "store"

    capture = _capture(root, home, store_it=True)

    store = Store.open(home)
    try:
        entries = codec.decode_tree(store.read(capture.root))
        by_name = {e.name: e for e in entries}
        assert by_name[b"small.db"].flags & EntryFlag.SQLITE_IMAGE
        assert by_name[b"linked.txt"].link == b"flat/f002.txt"
        stack = [capture.root]
        files = 0
        while stack:
            for entry in codec.decode_tree(store.read(stack.pop())):
                if entry.content_kind is ContentKind.TREE:
                    stack.append(entry.content)
                elif entry.content_kind is ContentKind.CHUNK:
                    assert len(store.read(entry.content)) == entry.size
                    files += 1
        assert files == 40 * 14 + 300 + 2
        flat = codec.decode_tree(store.read(capture.dirs["flat"]))
        assert {e.name: e.xattrs for e in flat}[b"f001.txt"] == ((b"user.note", b"kept"),)
    finally:
        store.close()
