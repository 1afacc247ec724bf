"""A tree 1,000 folders deep (a path of ~2,000 bytes, well inside the kernel's 4,096) goes
through everything a user does with it: watch, snap, diff, fork, merge, rewind. The walks reach
any depth without recursion (the capture's, the applier's folder opening, removing a tree, a
merge's tree rewrite)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tillage.platform.folders import remove_folder

DEPTH = 1000
DEEP = "/".join(["d"] * DEPTH)


def _make_deep(root: Path) -> None:
    """Makes `d/d/…/d` (DEPTH folders) below `root` one level at a time, by descriptor (as
    os.makedirs, itself recursive, cannot)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)


@pytest.fixture
def deep(folder: Path) -> Iterator[Path]:
    """The workspace folder, the deep trees below it and beside it (forks) removed after by
    descriptor: shutil.rmtree and pytest's clean-up of old runs recurse, and would fail."""
    _make_deep(folder)
    try:
        yield folder
    finally:
        for top in (folder, folder.parent / f"{folder.name}.forks"):
            remove_folder(top)


def test_a_tree_a_thousand_folders_deep_is_watched_sealed_diffed_rewound_and_forked(
    till: Till, deep: Path
) -> None:
    folder = deep
    leaf = folder / DEEP / "leaf.txt"
    leaf.write_text("leaf\n")
    till.json("watch", "--no-daemon")
    first = till.json("timeline")["snapshots"][0]["id"]

    leaf.write_text("changed\n")
    (folder / DEEP / "new.txt").write_text("new\n")
    (folder / DEEP[: len(DEEP) // 2] / "middle.txt").write_text("middle\n")
    snap = till.json("snap")["snapshot"]
    assert snap["files"] == 3
    diff = till.json("diff", first, "--to", snap["id"])
    live = till.json("diff", first)  # against the live folder: a walk of it
    assert live["changes"] == diff["changes"]
    changed = {c["path"]: c["kind"] for c in diff["changes"]}
    assert changed[f"{DEEP}/leaf.txt"] == "modified"
    assert changed[f"{DEEP}/new.txt"] == "added"
    assert changed[f"{DEEP[: len(DEEP) // 2]}/middle.txt"] == "added"

    till.json("fork", "k")
    fork_root = folder.parent / f"{folder.name}.forks" / "k"
    assert (fork_root / DEEP / "new.txt").read_text() == "new\n"
    (fork_root / DEEP / "forked.txt").write_text("made in the fork\n")
    till.json("merge", "k")  # a change 1,000 folders down lands in the parent
    assert (folder / DEEP / "forked.txt").read_text() == "made in the fork\n"
    (folder / DEEP / "forked.txt").unlink()

    till.json("rewind", first, "--yes")
    assert leaf.read_text() == "leaf\n"
    assert not (folder / DEEP / "new.txt").exists()
    assert not (folder / DEEP[: len(DEEP) // 2] / "middle.txt").exists()

    (folder / "d").rename(folder / "gone")  # the whole tree moved away...
    till.json("rewind", snap["id"], "--yes")  # ...comes back, and the moved copy goes
    assert leaf.read_text() == "changed\n"
    assert not (folder / "gone").exists()  # removed whole (and kept in the undo snapshot)
    till.json("fork", "at", "--at", first)
    at_root = folder.parent / f"{folder.name}.forks" / "at"
    assert (at_root / DEEP / "leaf.txt").read_text() == "leaf\n"


class _Trees:
    """An object writer that keeps the trees it is given (write_manifest needs no more)."""

    def __init__(self) -> None:
        self.trees: dict[bytes, bytes] = {}

    def put(self, kind: int, object_id: bytes, raw: bytes) -> None:
        self.trees[object_id] = bytes(raw)


def test_a_manifest_two_thousand_folders_deep_is_written_and_classified() -> None:
    from tillage.core import codec
    from tillage.core.classes import class_of
    from tillage.core.models import ContentKind, Entry, EntryKind
    from tillage.workspace.trees import write_manifest

    depth = 2000
    folder = Entry(b"d", EntryKind.DIR, 0o755, 0, 0, ContentKind.TREE, b"", ())
    manifest = {"/".join(["d"] * n): folder for n in range(1, depth + 1)}
    leaf = "/".join(["d"] * depth) + "/leaf.txt"
    manifest[leaf] = Entry(b"leaf.txt", EntryKind.FILE, 0o644, 0, 0, ContentKind.NONE, b"", ())
    writer = _Trees()
    root = write_manifest(writer, manifest)  # type: ignore[arg-type]
    levels = 0
    tid = root
    while True:
        entries = codec.decode_tree(writer.trees[tid])
        if entries[0].kind is not EntryKind.DIR:
            break
        levels += 1
        tid = entries[0].content
    assert levels == depth and entries[0].name == b"leaf.txt"
    assert class_of("/".join(["d"] * depth) + "/node_modules/x.js") == "dependency"
