"""Capture keeps what a folder is: trees deeper than a path can name, hard links as links, and
sparse files as their data and holes (without reading or storing the zeros)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from tests.helpers import DEEP_NAMES, open_deep, write_at

from tillage import call
from tillage.core import codec
from tillage.core.models import HOLE_ID, ChunkRef, ContentKind, Entry, EntryFlag, is_hole
from tillage.store.store import Store
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.pathindex import RACY_WINDOW_NS, PathIndex
from tillage.workspace.policy import Policy
from tillage.workspace.trees import flatten

MIB = 1 << 20


def _watch(home: Path, folder: Path) -> Any:
    return call("workspace.watch", home=home, folder=folder, no_daemon=True).head


def _snap(home: Path, folder: Path) -> Any:
    return call("timeline.snap", home=home, folder=folder).snapshot


def _entries(home: Path, folder: Path, snapshot_id: str) -> dict[str, Entry]:
    tree = call("timeline.show", home=home, folder=folder, id=snapshot_id).tree
    store = Store.open(home)
    try:
        return flatten(store, bytes.fromhex(tree))
    finally:
        store.close()


def _refs(store: Store, entry: Entry) -> list[ChunkRef]:
    if entry.content_kind is ContentKind.CHUNK:
        return [ChunkRef(entry.content, entry.size)]
    return codec.decode_blob(store.read(entry.content))[1]


def _content(home: Path, entry: Entry) -> bytes:
    store = Store.open(home)
    try:
        return b"".join(
            bytes(ref.length) if is_hole(ref) else store.read(ref.id) for ref in _refs(store, entry)
        )
    finally:
        store.close()


def _age(folder: Path) -> None:
    """Puts every file outside the racy window, so a second seal may trust its facts."""
    old = time.time_ns() - 10 * 10**9
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            os.utime(os.path.join(dirpath, name), ns=(old, old), follow_symlinks=False)


def _walk(folder: Path, home: Path, previous: Capture | None = None) -> Capture:
    """One capture through a real writer, against what `previous` saw. It starts, as far as
    INV-8 is concerned, past the racy window of the ctimes that _age() just set."""
    index = PathIndex(previous.rows, previous.dirs) if previous else PathIndex()
    started = time.time_ns() + 2 * RACY_WINDOW_NS
    store = Store.open(home)
    try:
        with store.writer() as writer:
            capture = Walker(folder, Policy([]), index, writer, store.tmp_dir, started).run()
            writer.commit()
        return capture
    finally:
        store.close()


# -- deep trees ------------------------------------------------------------------------------


def _make_deep(folder: Path) -> str:
    fd = open_deep(folder, create=True)
    try:
        write_at(fd, "bottom.txt", b"at the bottom\n")
        os.symlink("bottom.txt", "link", dir_fd=fd)
    finally:
        os.close(fd)
    return "/".join(DEEP_NAMES)


def test_a_tree_deeper_than_the_path_limit_seals_whole_and_exact(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    (folder / "top.txt").write_text("top\n")
    deep = _make_deep(folder)
    assert len(str(folder / deep)) > os.pathconf("/", "PC_PATH_MAX")

    head = _watch(home, folder)

    assert head.grade == "exact"
    entries = _entries(home, folder, head.id)
    assert _content(home, entries[f"{deep}/bottom.txt"]) == b"at the bottom\n"
    assert entries[f"{deep}/link"].content == b"bottom.txt"
    assert head.files == 3


def test_a_tree_deeper_than_the_path_limit_diffs_against_the_live_folder(
    tmp_path: Path,
) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    deep = _make_deep(folder)
    head = _watch(home, folder)
    unchanged = call("timeline.diff", home=home, folder=folder, target=head.id)
    assert unchanged.changes == ()

    fd = open_deep(folder)
    try:
        write_at(fd, "bottom.txt", b"changed at the bottom\n")
    finally:
        os.close(fd)
    changed = call("timeline.diff", home=home, folder=folder, target=head.id)

    assert [(c.path, c.kind) for c in changed.changes] == [(f"{deep}/bottom.txt", "modified")]
    snap = _snap(home, folder)
    assert snap.grade == "exact"
    entry = _entries(home, folder, snap.id)[f"{deep}/bottom.txt"]
    assert _content(home, entry) == b"changed at the bottom\n"


# -- hard links ------------------------------------------------------------------------------


def _make_links(folder: Path) -> None:
    (folder / "d").mkdir()
    (folder / "a.txt").write_bytes(b"shared bytes\n")
    os.link(folder / "a.txt", folder / "b.txt")
    os.link(folder / "a.txt", folder / "d" / "c.txt")
    (folder / "big.bin").write_bytes(os.urandom(3 * MIB))
    os.link(folder / "big.bin", folder / "d" / "big-again.bin")
    (folder / "lonely.txt").write_text("one name\n")


def test_hard_links_are_sealed_as_links_to_the_first_name_in_walk_order(
    tmp_path: Path,
) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_links(folder)

    head = _watch(home, folder)

    assert head.grade == "exact"
    entries = _entries(home, folder, head.id)
    first = entries["a.txt"]
    assert not first.flags & EntryFlag.HARDLINK and first.link == b""
    for later in ("b.txt", "d/c.txt"):
        entry = entries[later]
        assert entry.flags & EntryFlag.HARDLINK
        assert entry.link == b"a.txt"
        assert (entry.content_kind, entry.content, entry.size) == (
            first.content_kind,
            first.content,
            first.size,
        )
    assert entries["d/big-again.bin"].link == b"big.bin"
    assert entries["d/big-again.bin"].content == entries["big.bin"].content
    assert not entries["lonely.txt"].flags & EntryFlag.HARDLINK


def test_hard_links_are_read_once_and_an_unchanged_folder_keeps_its_tree(
    tmp_path: Path,
) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_links(folder)
    _age(folder)

    first = _walk(folder, home)
    second = _walk(folder, home, first)

    assert first.read_files == 3  # a.txt, big.bin, lonely.txt: each inode once
    assert second.read_files == 0
    assert second.root == first.root
    assert not first.notes


def test_a_hard_link_changed_through_one_name_is_seen_under_every_name(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_links(folder)
    _watch(home, folder)
    with open(folder / "d" / "c.txt", "ab") as f:
        f.write(b"more\n")

    snap = _snap(home, folder)

    entries = _entries(home, folder, snap.id)
    for name in ("a.txt", "b.txt", "d/c.txt"):
        assert _content(home, entries[name]) == b"shared bytes\nmore\n"


# -- sparse files ----------------------------------------------------------------------------


def _make_sparse(path: Path, size: int, data: dict[int, bytes]) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, chunk in data.items():
            f.seek(offset)
            f.write(chunk)


def _stored_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "packs").iterdir())


def test_a_sparse_file_is_sealed_as_its_data_and_holes(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    head_bytes = os.urandom(100_000)
    middle = os.urandom(1 * MIB)
    tail = os.urandom(5000)
    size = 256 * MIB
    layout = {0: head_bytes, 64 * MIB: middle, size - len(tail): tail}
    _make_sparse(folder / "disk.img", size, layout)

    head = _watch(home, folder)

    assert head.grade == "exact"
    entry = _entries(home, folder, head.id)["disk.img"]
    assert entry.content_kind is ContentKind.BLOB and entry.size == size
    store = Store.open(home)
    try:
        refs = _refs(store, entry)
    finally:
        store.close()
    assert sum(r.length for r in refs) == size
    holes = [r for r in refs if r.id == HOLE_ID]
    assert sum(r.length for r in holes) >= size - 3 * MIB
    assert _stored_bytes(home) < 4 * MIB  # the zeros were not stored
    content = _content(home, entry)
    for offset, chunk in layout.items():
        assert content[offset : offset + len(chunk)] == chunk
    assert content.count(0) >= size - 2 * MIB


def test_a_small_sparse_file_is_a_blob_with_a_hole(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_sparse(folder / "small.img", 200 * 1024, {150 * 1024: b"x" * 10})

    head = _watch(home, folder)

    entry = _entries(home, folder, head.id)["small.img"]
    assert entry.content_kind is ContentKind.BLOB and entry.size == 200 * 1024
    content = _content(home, entry)
    assert content == bytes(150 * 1024) + b"x" * 10 + bytes(200 * 1024 - 150 * 1024 - 10)


def test_a_hole_longer_than_a_chunk_length_can_say_is_split(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    size = 9 * (1 << 30)
    _make_sparse(folder / "vast.img", size, {size - 3: b"end"})

    head = _watch(home, folder)

    entry = _entries(home, folder, head.id)["vast.img"]
    store = Store.open(home)
    try:
        refs = _refs(store, entry)
    finally:
        store.close()
    assert entry.size == size and sum(r.length for r in refs) == size
    assert all(r.length < 1 << 32 for r in refs)
    assert len(refs) <= 6  # a few holes of at most 4 GiB each, and the data
    assert sum(r.length for r in refs if r.id == HOLE_ID) == size - 4096
    assert [r.id == HOLE_ID for r in refs][-1] is False
    assert _stored_bytes(home) < MIB


def test_an_unchanged_sparse_file_is_not_read_again(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_sparse(folder / "disk.img", 32 * MIB, {MIB: b"data"})
    _age(folder)

    first = _walk(folder, home)
    second = _walk(folder, home, first)

    assert first.read_files == 1 and second.read_files == 0
    assert first.read_bytes < MIB
    assert second.root == first.root


def test_a_database_deeper_than_the_path_limit_is_sealed_not_refused(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    _make_deep(folder)
    made = tmp_path / "made.db"
    with sqlite3.connect(made) as db:
        db.execute("CREATE TABLE t(x)")
        db.execute("INSERT INTO t VALUES (42)")
    db.close()
    fd = open_deep(folder)
    try:
        os.rename(made, "app.db", dst_dir_fd=fd)
    finally:
        os.close(fd)

    capture = _walk(folder, home)

    store = Store.open(home)
    try:
        bottom = capture.dirs["/".join(DEEP_NAMES)]
        entry = {e.name: e for e in codec.decode_tree(store.read(bottom))}[b"app.db"]
        data = b"".join(store.read(r.id) for r in _refs(store, entry))
    finally:
        store.close()
    assert data[:16] == b"SQLite format 3\x00" and len(data) == entry.size
    # SQLite opens by path (at most 512 bytes, resolved): its bytes are kept, said raw.
    assert [n.reason.split(":")[0] for n in capture.notes] == [
        "SQLite database copied raw, not as a consistent image"
    ]


# -- access times ----------------------------------------------------------------------------


def test_a_seal_leaves_access_times_alone(tmp_path: Path) -> None:
    """Reading would set each file's atime (relatime updates an atime older than the mtime),
    dirtying an inode per file that the seal's durability then waits for."""
    home, folder = tmp_path / "store", tmp_path / "ws"
    (folder / "sub").mkdir(parents=True)
    paths = [folder / "a.txt", folder / "sub" / "b.bin"]
    paths[0].write_text("small\n")
    paths[1].write_bytes(os.urandom(2 * MIB))
    old = time.time_ns() - 3600 * 10**9
    for path in [*paths, folder / "sub"]:
        st = path.stat()
        os.utime(path, ns=(old, st.st_mtime_ns))

    _walk(folder, home)

    assert [p.stat().st_atime_ns for p in [*paths, folder / "sub"]] == [old, old, old]
