"""core/sessions.py, pure: session IDs, the change walk (equal to `till diff`), change totals,
and which sessions a cleanup picks."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.models import Change, ChangeKind, ContentKind, Entry, EntryKind
from tillage.core.paths import fs_decode, join
from tillage.core.sessions import (
    DAY_NS,
    change_totals,
    session_id_problem,
    sessions_to_remove,
    tree_changes,
)
from tillage.core.treediff import diff_manifests

# A tree is {name: node}; a node is ("file", content, mode), ("link", target) or ("dir", mode,
# tree). Few names and contents, so two random trees share and differ in every way.
names = st.sampled_from([b"a", b"b", b"c.txt"])
files = st.tuples(
    st.just("file"), st.sampled_from([b"x", b"yy", b""]), st.sampled_from([0o644, 0o755])
)
links = st.tuples(st.just("link"), st.sampled_from([b"a", b"../b"]))
trees = st.recursive(
    st.dictionaries(names, st.one_of(files, links), max_size=3),
    lambda inner: st.dictionaries(
        names,
        st.one_of(files, links, st.tuples(st.just("dir"), st.sampled_from([0o755, 0o700]), inner)),
        max_size=3,
    ),
    max_leaves=12,
)


class FakeStore:
    """Trees stored by an ID of their entries, as a ReadTree."""

    def __init__(self) -> None:
        self.trees: dict[bytes, list[Entry]] = {}
        self.reads = 0

    def put(self, tree: dict[bytes, Any]) -> bytes:
        entries = []
        for name, node in sorted(tree.items()):
            if node[0] == "file":
                content = hashlib.blake2b(node[1], digest_size=8).digest()
                entries.append(
                    Entry(
                        name, EntryKind.FILE, node[2], len(node[1]), 0, ContentKind.CHUNK, content
                    )
                )
            elif node[0] == "link":
                entries.append(
                    Entry(
                        name, EntryKind.SYMLINK, 0o777, len(node[1]), 0, ContentKind.TARGET, node[1]
                    )
                )
            else:
                sub = self.put(node[2])
                entries.append(Entry(name, EntryKind.DIR, node[1], 0, 0, ContentKind.TREE, sub))
        tid = hashlib.blake2b(repr(entries).encode(), digest_size=16).digest()
        self.trees[tid] = entries
        return tid

    def read(self, tid: bytes) -> list[Entry]:
        self.reads += 1
        return self.trees[tid]

    def flatten(self, tid: bytes, folder: str = "") -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        for entry in self.trees[tid]:
            path = join(folder, fs_decode(entry.name))
            out[path] = entry
            if entry.kind is EntryKind.DIR:
                out.update(self.flatten(entry.content, path))
        return out


@examples(300)
@given(trees, trees)
def test_the_change_walk_lists_exactly_what_till_diff_lists(
    old: dict[bytes, Any], new: dict[bytes, Any]
) -> None:
    store = FakeStore()
    a, b = store.put(old), store.put(new)
    assert tree_changes(store.read, a, b) == diff_manifests(store.flatten(a), store.flatten(b))
    assert tree_changes(store.read, None, b) == diff_manifests({}, store.flatten(b))


def test_the_change_walk_reads_only_folders_that_differ() -> None:
    store = FakeStore()
    big = {bytes([65 + i]): ("dir", 0o755, {b"f": ("file", b"x", 0o644)}) for i in range(20)}
    changed = {**big, b"A": ("dir", 0o755, {b"f": ("file", b"yy", 0o644)})}
    a, b = store.put(big), store.put(changed)
    store.reads = 0
    assert tree_changes(store.read, a, b) == [Change("A/f", ChangeKind.MODIFIED, 1, 2)]
    assert store.reads == 4  # both roots and both A folders; the 19 others are not read
    assert tree_changes(store.read, a, a) == []


def test_change_totals_count_files_and_their_sizes_a_deleted_one_by_its_old_size() -> None:
    changes = [
        Change("d", ChangeKind.ADDED, None, None),  # a folder: no file
        Change("d/new", ChangeKind.ADDED, None, 100),
        Change("mod", ChangeKind.MODIFIED, 50, 70),
        Change("gone", ChangeKind.DELETED, 30, None),  # upstream: its old size counts
        Change("x", ChangeKind.TYPE_CHANGED, None, 5),  # a folder became a file
        Change("m", ChangeKind.MODE_CHANGED, 9, 9),
    ]
    assert change_totals(changes) == (5, 205)
    assert change_totals([Change("gone", ChangeKind.DELETED, 4096, None)]) == (1, 4096)
    assert change_totals([]) == (0, 0)


def test_session_ids() -> None:
    assert session_id_problem("0d6c4c39-8d4e-4f57-9f5e-3f6a3b1c2d7e") is None
    assert session_id_problem("my session ü") is None
    assert session_id_problem("x" * 200) is None
    for bad in ("", " \t", "x" * 201, "a\nb", "a\x00b", "a\x7fb", "a\x85b", "a\udcffb"):
        assert session_id_problem(bad) is not None, repr(bad)


def test_cleanup_picks_by_age_and_by_count() -> None:
    now = 100 * DAY_NS
    ages = [("a", now - 40 * DAY_NS), ("b", now - 1), ("c", now - 10 * DAY_NS), ("d", now)]
    assert sessions_to_remove(ages, now, 30, None) == ["a"]
    assert sessions_to_remove(ages, now, None, 2) == ["c", "a"]
    assert sessions_to_remove(ages, now, 5, 3) == ["c", "a"]
    assert sessions_to_remove(ages, now, None, None) == []
    assert sessions_to_remove([], now, 0, 0) == []


def test_a_cleanup_limit_of_0_is_no_limit_as_upstream() -> None:
    now = 100 * DAY_NS
    ages = [("a", now - 40 * DAY_NS), ("b", now - 1), ("c", now - 10 * DAY_NS), ("d", now)]
    assert sessions_to_remove(ages, now, None, 0) == []
    assert sessions_to_remove(ages, now, 0, None) == []
    assert sessions_to_remove(ages, now, 0, 0) == []
    assert sessions_to_remove(ages, now, 0, 2) == ["c", "a"]  # the other limit still holds
    assert sessions_to_remove(ages, now, 30, 0) == ["a"]
