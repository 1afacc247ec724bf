"""What a flush lists and what it makes of it.

Only a path absent from the listing was deleted by the run: one listed and then gone when read
(an editor replacing the file, a moment nobody can describe) is left alone and stays owned,
and the next flush decides it. And a flush lists only what its writable mounts own: a file
outside every mount is never read and never an orphan; an orphan is a file at or under a
writable mount's prefix that no mount takes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.projection.test_cli import ENTRIES, MOUNT, kinds, make_table, sha, table_rows
from tillage.platform.folders import remove_folder
from tillage.projection import (
    ClaimRegistry,
    HostPlace,
    MemoryCollection,
    MemoryPlace,
    Mount,
    Projection,
    hash_content,
)
from tillage.projection import places as places_module


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def outcome_kinds(report: Any) -> dict[str, str]:
    return {o.path: o.kind for o in report.outcomes}


class GapPlace(MemoryPlace):
    """A place where named paths vanish right after each listing (taken aside, as an editor
    that removes a file before writing it again would), and every call is counted."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        super().__init__(initial)
        self.vanish: set[str] = set()
        self.aside: dict[str, str] = {}
        self.listed_with: list[list[str]] = []
        self.reads: list[str] = []

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        self.listed_with.append(list(prefixes))
        found = await super().list(prefixes)
        for path in self.vanish:
            content = self.snapshot().get(path)
            if content is not None:
                self.aside[path] = content
                self.remove(path)
        return found

    async def read(self, path: str) -> str | None:
        self.reads.append(path)
        return await super().read(path)

    def put_back(self, path: str, content: str | None = None) -> None:
        """The editor finishing: the file is back (as it was, or with `content`)."""
        self.vanish.discard(path)
        saved = self.aside.pop(path)
        run(self.write(path, saved if content is None else content))


def gap_setup() -> tuple[Projection, MemoryCollection, GapPlace]:
    art = MemoryCollection({"notes.md": "n1", "keep.md": "k1"})
    place = GapPlace()
    projection = Projection([Mount("art", art, "col:art", True)], place, ClaimRegistry())
    run(projection.hydrate())
    return projection, art, place


# -- item 15: listed, then gone when read ------------------------------------------------------


def test_a_file_listed_then_gone_when_read_is_left_alone_and_stays_owned() -> None:
    projection, art, place = gap_setup()
    base = projection.committed()["art/notes.md"]
    place.vanish.add("art/notes.md")
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/keep.md": "unchanged"}, "nothing decided about it"
    assert art.as_dict() == {"notes.md": "n1", "keep.md": "k1"}, "the entry is not deleted"
    assert projection.committed()["art/notes.md"] == base, "still owned, base unchanged"


@pytest.mark.parametrize(
    ("back", "kind", "entry"),
    [("n1", "unchanged", "n1"), ("n2", "written", "n2")],
    ids=["back-as-it-was", "back-edited"],
)
def test_the_flush_after_the_gap_decides_the_file_that_came_back(
    back: str, kind: str, entry: str
) -> None:
    projection, art, place = gap_setup()
    place.vanish.add("art/notes.md")
    run(projection.flush())
    place.put_back("art/notes.md", back)
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/notes.md": kind, "art/keep.md": "unchanged"}
    assert art.get("notes.md") == entry
    assert projection.committed()["art/notes.md"] == hash_content(back)


def test_a_file_truly_gone_from_the_listing_is_deleted_by_the_next_flush() -> None:
    projection, art, place = gap_setup()
    place.vanish.add("art/notes.md")
    run(projection.flush())
    place.vanish.clear()  # it never comes back: absent from the next listing
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/notes.md": "deleted", "art/keep.md": "unchanged"}
    assert art.as_dict() == {"keep.md": "k1"}
    assert "art/notes.md" not in projection.owned_paths()


class RaisingPlace(MemoryPlace):
    """A place that says "no file" by raising FileNotFoundError, for named listed paths."""

    def __init__(self, initial: dict[str, str], missing: set[str]) -> None:
        super().__init__(initial)
        self.missing = missing

    async def read(self, path: str) -> str | None:
        if path in self.missing:
            raise FileNotFoundError(path)
        return await super().read(path)


def test_a_place_whose_read_raises_file_not_found_for_a_listed_path_keeps_the_entry() -> None:
    art = MemoryCollection({"notes.md": "n1"})
    place = RaisingPlace({}, set())
    projection = Projection([Mount("art", art, "col:art", True)], place, ClaimRegistry())
    run(projection.hydrate())
    place.missing.add("art/notes.md")
    report = run(projection.flush())
    assert report.outcomes == []
    assert art.as_dict() == {"notes.md": "n1"}
    assert projection.owned_paths() == ["art/notes.md"]
    place.missing.clear()
    place.remove("art/notes.md")  # now really gone: absent from the listing
    assert outcome_kinds(run(projection.flush())) == {"art/notes.md": "deleted"}
    assert art.as_dict() == {}


class UnlinkAfterListing(HostPlace):
    """A real folder where a file is unlinked right after the listing that showed it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gone: Path | None = None

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        found = await super().list(prefixes)
        if self.gone is not None:
            self.gone.unlink()
            self.gone = None
        return found


def test_a_real_folder_with_a_file_removed_between_listing_and_reading(tmp_path: Path) -> None:
    art = MemoryCollection({"notes.md": "n1", "keep.md": "k1"})
    place = UnlinkAfterListing(tmp_path / "place")
    projection = Projection([Mount("art", art, "col:art", True)], place, ClaimRegistry())
    run(projection.hydrate())
    notes = tmp_path / "place" / "art" / "notes.md"
    place.gone = notes
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/keep.md": "unchanged"}
    assert art.as_dict() == {"notes.md": "n1", "keep.md": "k1"}
    assert "art/notes.md" in projection.owned_paths()
    notes.write_text("n2")  # the editor's new content lands
    assert outcome_kinds(run(projection.flush()))["art/notes.md"] == "written"
    assert art.get("notes.md") == "n2"


def test_till_project_flush_keeps_a_row_whose_file_vanished_mid_flush(
    till: Till, folder: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line's flush (runs.flush_folder, in this process, its folder's listing
    followed by the file's removal): the row and the recorded ownership survive; later
    `till project flush` runs decide the file once it is back, and delete the row once it is
    gone from the listing."""
    from tillage.projection import runs

    till.json("project", "hydrate", "--mount", MOUNT)
    notes = folder / "art" / "notes.md"
    saved = notes.read_text()
    listing = runs.FolderPlace.list

    async def list_then_unlink(self: runs.FolderPlace, prefixes: Sequence[str]) -> list[str]:
        found = await listing(self, prefixes)
        notes.unlink()
        return found

    with monkeypatch.context() as patched:
        patched.setattr(runs.FolderPlace, "list", list_then_unlink)
        flushed = runs.flush_folder(till.home, folder, None)
    assert {o.path: o.kind for o in flushed.report.outcomes} == {
        "art/a/b.txt": "unchanged",
        "art/keep.md": "unchanged",
    }
    assert table_rows(db, "art")["notes.md"] == saved, "the row is still there"
    (record,) = (till.home / "projections").glob("*.json")
    assert json.loads(record.read_text())["baseline"]["art/notes.md"] == sha(saved), "owned"

    notes.write_text(saved)
    assert kinds(till.json("project", "flush"))["art/notes.md"] == "unchanged"
    notes.unlink()
    assert kinds(till.json("project", "flush"))["art/notes.md"] == "deleted"
    assert "notes.md" not in table_rows(db, "art")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "runs.db"
    make_table(path, "art", dict(ENTRIES))
    return path


# -- item 16: only what the mounts own is listed -----------------------------------------------


def test_files_outside_every_mount_are_never_read_nor_orphans() -> None:
    art = MemoryCollection({"notes.md": "n1"})
    ref = MemoryCollection({"guide.md": "g1"})
    place = GapPlace({f"vendor/pkg{i}/mod.py": "x" for i in range(200)} | {"stray.txt": "?"})
    projection = Projection(
        [Mount("art", art, "col:art", True), Mount("ref", ref, "col:ref", False)],
        place,
        ClaimRegistry(),
    )
    run(projection.hydrate())
    run(place.write("ref/added.md", "under a read-only mount"))
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/notes.md": "unchanged"}
    assert place.listed_with == [["art"]], "only the writable mount's prefix is listed"
    assert all(p == "art" or p.startswith("art/") for p in place.reads), place.reads


def test_a_place_that_lists_more_than_asked_does_not_make_it_orphans() -> None:
    class Everything(MemoryPlace):
        async def list(self, prefixes: Sequence[str]) -> list[str]:
            return await super().list([""])

    art = MemoryCollection({"notes.md": "n1"})
    place = Everything({"stray.txt": "?", "art-old/x.md": "?"})
    projection = Projection([Mount("art", art, "col:art", True)], place, ClaimRegistry())
    run(projection.hydrate())
    assert outcome_kinds(run(projection.flush())) == {"art/notes.md": "unchanged"}


def test_files_under_a_writable_prefix_that_no_mount_takes_are_orphans() -> None:
    """A metadata name, and a file where a mount's folder belongs (the writable mount's own,
    and a read-only mount's nested inside it); files of that nested read-only mount are left
    alone, and nested writable prefixes are listed once, with the one holding them."""
    art = MemoryCollection({"notes.md": "n1"})
    drafts = MemoryCollection({"d.md": "d1"})
    ref = MemoryCollection({"guide.md": "g1"})
    place = GapPlace()
    projection = Projection(
        [
            Mount("art", art, "col:art", True),
            Mount("art/drafts", drafts, "col:drafts", True),
            Mount("art/ref", ref, "col:ref", False),
            Mount("docs", MemoryCollection(), "col:docs", True),
        ],
        place,
        ClaimRegistry(),
    )
    run(projection.hydrate())
    run(place.write("art/_scratch.md", "a metadata name"))
    run(place.write("art/drafts/_x", "a metadata name in the nested mount"))
    run(place.write("art/ref/added.md", "read-only: left alone"))
    run(place.write("docs", "a file where the mount's folder belongs"))
    report = run(projection.flush())
    assert outcome_kinds(report) == {
        "art/_scratch.md": "orphan",
        "art/drafts/_x": "orphan",
        "art/drafts/d.md": "unchanged",
        "art/notes.md": "unchanged",
        "docs": "orphan",
    }
    assert place.listed_with == [["art", "docs"]]
    assert art.as_dict() == {"notes.md": "n1"} and drafts.as_dict() == {"d.md": "d1"}


def test_a_real_folder_walks_only_the_mounts_prefixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big unrelated tree beside the mount is never walked: the folders a flush lists are
    counted (os.scandir calls), not timed."""
    root = tmp_path / "place"
    for i in range(300):
        (root / "node_modules" / f"pkg{i}" / "lib").mkdir(parents=True)
        (root / "node_modules" / f"pkg{i}" / "lib" / "index.js").write_text("x")
    (root / "stray.txt").write_text("?")
    art = MemoryCollection({"notes.md": "n1", "a/b.md": "b1"})
    projection = Projection([Mount("art", art, "col:art", True)], HostPlace(root), ClaimRegistry())
    run(projection.hydrate())
    calls = []
    real_scandir = os.scandir

    def counting(fd: Any) -> Any:
        calls.append(fd)
        return real_scandir(fd)

    monkeypatch.setattr(os, "scandir", counting)
    report = run(projection.flush())
    assert outcome_kinds(report) == {"art/a/b.md": "unchanged", "art/notes.md": "unchanged"}
    assert len(calls) == 2, "art/ and art/a/: nothing of node_modules/"


# -- the walk: any depth, few descriptors ------------------------------------------------------


def deep_tree(root: Path, depth: int) -> str:
    """A chain of `depth` folders below root/art with a file at the bottom, made by
    descriptor (its path is longer than PATH_MAX); the file's place path."""
    names = ["art"] + [f"d{i}" for i in range(depth)]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("leaf.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"deep\n")
        os.close(leaf)
    finally:
        os.close(fd)
    return "/".join([*names, "leaf.md"])


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_tree_1500_folders_deep_is_listed_and_flushed_without_recursion(
    tmp_path: Path,
) -> None:
    root = tmp_path / "place"
    place = HostPlace(root)
    try:
        leaf = deep_tree(root, 1500)
        before = open_descriptors()
        assert run(place.list(["art"])) == [leaf]
        assert run(place.list([""])) == [leaf]
        assert open_descriptors() == before, "every descriptor closed"
        art = MemoryCollection()
        projection = Projection([Mount("art", art, "col:art", True)], place, ClaimRegistry())
        assert outcome_kinds(run(projection.flush())) == {leaf: "created"}
        assert art.as_dict() == {leaf.removeprefix("art/"): "deep\n"}
    finally:
        remove_folder(root)  # by descriptor: pytest's clean-up of old runs recurses


def test_a_deep_and_branching_walk_holds_a_bounded_number_of_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comb 300 folders deep with a side folder at every level: the walk returns to every
    level, yet never holds more than MAX_OPEN_FOLDERS descriptors of its own."""
    root = tmp_path / "place"
    place = HostPlace(root)
    expected = []
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    at = ""
    for i in range(300):
        name = f"s{i}"
        os.mkdir(name, dir_fd=fd)
        side = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=side))
        os.close(side)
        expected.append(f"{at}{name}/f")
        os.mkdir("c", dir_fd=fd)  # c sorts before s{i}: walked first, so every level waits
        child = os.open("c", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
        at += "c/"
    os.close(fd)
    seen: list[int] = []  # descriptors open each time a folder is read
    base = open_descriptors()
    real_read_folder = places_module._read_folder

    def watching(fd: int, at: str, *, top: bool) -> tuple[list[str], list[str]]:
        seen.append(open_descriptors())
        return real_read_folder(fd, at, top=top)

    monkeypatch.setattr(places_module, "_read_folder", watching)
    assert run(place.list([""])) == sorted(expected)
    assert len(seen) == 601
    # Beyond what was open when the top was read: the folders the walk keeps, and the one
    # just opened before it lets go of the oldest.
    assert max(seen) - seen[0] <= places_module.MAX_OPEN_FOLDERS + 1, max(seen) - seen[0]
    assert max(seen) - seen[0] >= places_module.MAX_OPEN_FOLDERS - 1, "the comb does wait"
    assert open_descriptors() == base


def test_a_folder_replaced_while_the_walk_had_let_it_go_makes_the_listing_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the walk must open again and that is no longer the folder it read: the place
    cannot be listed truthfully, so it raises (a flush then decides nothing)."""
    root = tmp_path / "place"
    place = HostPlace(root)
    monkeypatch.setattr(places_module, "MAX_OPEN_FOLDERS", 1)
    for path in ("a/b/c/x", "a/b/c/y/z", "a/b/w/v"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("1")
    real_read_folder = places_module._read_folder
    swapped = []

    def swapping(fd: int, at: str, *, top: bool) -> tuple[list[str], list[str]]:
        if at == "a/b/c/y" and not swapped:  # a/b was let go by now; replace it
            os.rename(root / "a" / "b", root / "a" / "old")
            (root / "a" / "b" / "w").mkdir(parents=True)
            swapped.append(True)
        return real_read_folder(fd, at, top=top)

    monkeypatch.setattr(places_module, "_read_folder", swapping)
    with pytest.raises(OSError, match="replaced while the place was listed"):
        run(place.list([""]))


def test_tillages_own_folder_is_never_listed_even_when_named_as_a_prefix(tmp_path: Path) -> None:
    root = tmp_path / "place"
    place = HostPlace(root)
    (root / ".tillage" / "x").mkdir(parents=True)
    (root / ".tillage" / "x" / "state.json").write_text("{}")
    run(place.write("a.md", "a"))
    assert run(place.list([".tillage"])) == []
    assert run(place.list([".tillage/x"])) == []
    assert run(place.list([""])) == ["a.md"]
