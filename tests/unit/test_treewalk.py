"""core.treewalk: the one walk over stored trees side by side, which reads only the folders
whose trees differ."""

from __future__ import annotations

from tillage.core import codec
from tillage.core.ids import tree_id
from tillage.core.models import ContentKind, Entry, EntryKind
from tillage.core.treewalk import Sides, Subtrees, walk


class Trees:
    """An in-memory store of trees, counting reads."""

    def __init__(self) -> None:
        self.trees: dict[bytes, list[Entry]] = {}
        self.reads: list[bytes] = []

    def put(self, *entries: Entry) -> bytes:
        tid = bytes(tree_id(codec.encode_tree(entries)))
        self.trees[tid] = list(entries)
        return tid

    def read(self, tid: bytes) -> list[Entry]:
        self.reads.append(tid)
        return self.trees[tid]


def file(name: str, content: bytes = b"1", mode: int = 0o644) -> Entry:
    return Entry(name.encode(), EntryKind.FILE, mode, 1, 0, ContentKind.CHUNK, content.ljust(32))


def folder(name: str, tree: bytes, mode: int = 0o755) -> Entry:
    return Entry(name.encode(), EntryKind.DIR, mode, 0, 0, ContentKind.TREE, tree)


def paths(steps: list[tuple[str, Sides]]) -> list[str]:
    return [path for path, _sides in steps]


def test_one_deep_file_changed_yields_the_folders_on_its_way_and_reads_only_them() -> None:
    t = Trees()
    shared = t.put(file("k"), file("l"))
    old = t.put(folder("a", t.put(folder("b", t.put(file("f", b"1"))))), folder("s", shared))
    new = t.put(folder("a", t.put(folder("b", t.put(file("f", b"2"))))), folder("s", shared))
    steps = list(walk(t.read, (old, new)))
    assert paths(steps) == ["a", "a/b", "a/b/f", "s"]
    _path, (before, after) = steps[2]
    assert before is not None and after is not None
    assert (before.content, after.content) == (b"1".ljust(32), b"2".ljust(32))
    assert shared not in t.reads  # equal subtrees are never read
    assert len(t.reads) == 6  # the two roots, and a and a/b on each side


def test_equal_roots_read_nothing() -> None:
    t = Trees()
    root = t.put(file("f"))
    assert list(walk(t.read, (root, root))) == []
    assert list(walk(t.read, (None, None))) == []
    assert t.reads == []


def test_none_is_the_empty_tree_and_names_come_in_sorted_order() -> None:
    t = Trees()
    root = t.put(file("b"), folder("a", t.put(file("z"), file("y"))), file("c"))
    steps = list(walk(t.read, (None, root)))
    assert paths(steps) == ["a", "a/y", "a/z", "b", "c"]
    assert all(sides[0] is None and sides[1] is not None for _p, sides in steps)


def test_a_file_replaced_by_a_folder_yields_both_sides_and_the_folders_contents() -> None:
    t = Trees()
    old = t.put(file("x"))
    new = t.put(folder("x", t.put(file("inner"), folder("sub", t.put(file("deep"))))))
    steps = list(walk(t.read, (old, new), prefix="top"))
    assert paths(steps) == ["top/x", "top/x/inner", "top/x/sub", "top/x/sub/deep"]
    _path, (before, after) = steps[0]
    assert before is not None and before.kind is EntryKind.FILE
    assert after is not None and after.kind is EntryKind.DIR
    assert [sides[0] for _p, sides in steps[1:]] == [None, None, None]


def test_a_folders_own_mode_change_is_one_step_and_its_equal_contents_are_not_read() -> None:
    t = Trees()
    inside = t.put(file("f"))
    old = t.put(folder("d", inside, mode=0o755))
    new = t.put(folder("d", inside, mode=0o700))
    assert paths(list(walk(t.read, (old, new)))) == ["d"]
    assert inside not in t.reads


def test_three_trees_with_a_refusing_predicate_are_not_entered_where_it_refuses() -> None:
    t = Trees()
    base_keep = t.put(file("k", b"1"))
    base = t.put(folder("keep", base_keep), folder("mine", t.put(file("m", b"1"))))
    ours = t.put(folder("keep", base_keep), folder("mine", t.put(file("m", b"2"))))
    theirs = t.put(
        folder("keep", t.put(file("k", b"3"))), folder("mine", t.put(file("m", b"1"))), file("n")
    )
    asked: list[tuple[str, Subtrees]] = []

    def enter(path: str, subtrees: Subtrees) -> bool:
        asked.append((path, subtrees))
        return path != "mine"

    steps = list(walk(t.read, (base, ours, theirs), enter=enter))
    assert paths(steps) == ["keep", "keep/k", "mine", "n"]
    assert [p for p, _s in asked] == ["keep", "mine"]  # asked only where the trees differ
    _path, sides = steps[-1]
    assert sides[:2] == (None, None) and sides[2] is not None
    # The base's `keep` is ours too: read once for both sides.
    assert t.reads.count(base_keep) == 1
