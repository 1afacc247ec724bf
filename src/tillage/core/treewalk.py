"""Walking stored trees side by side, pure: the one walk behind `till diff`'s changes, the
radar's changed paths, `till forks`' counts and the merge's three manifests.

Equal tree IDs hold equal contents, so a folder whose tree is the same on every side is never
read: two states of a large workspace that differ in a few files cost a few tree reads. The
caller says how a tree is read (core does no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from tillage.core.models import Entry, EntryKind
from tillage.core.paths import fs_decode, join

# Reads a stored tree (by ID) as its entries.
ReadTree = Callable[[bytes], Iterable[Entry]]
# One path's entry on each side, in the order of the roots (None: no such name there).
Sides = tuple[Entry | None, ...]
# One folder's tree ID on each side (None: not a folder there).
Subtrees = tuple[bytes | None, ...]
# Says whether the walk may enter a folder (its path and its subtrees), which already differs.
Enter = Callable[[str, Subtrees], bool]


def walk(
    read_tree: ReadTree,
    roots: Sequence[bytes | None],
    *,
    enter: Enter | None = None,
    prefix: str = "",
) -> Iterator[tuple[str, Sides]]:
    """Yields `(path, sides)` for every name in every folder the walk enters, from the trees
    `roots` (None: the empty tree; the top folder's path is `prefix`).

    A folder is entered only when its tree IDs on the sides are not all equal, and `enter`
    (when given) does not refuse it; so is the top folder, when the roots are not all equal.
    Depth first, a folder's names in sorted (byte) order, so the walk is deterministic; a
    tree read on several sides of one folder is read once. Iterative: a tree may be deeper
    than Python's recursion.
    """
    top = tuple(roots)
    if _all_equal(top):
        return
    stack = [_folder(read_tree, prefix, top)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            continue
        yield step
        path, sides = step
        subtrees = tuple(_subtree(e) for e in sides)
        if not _all_equal(subtrees) and (enter is None or enter(path, subtrees)):
            stack.append(_folder(read_tree, path, subtrees))


def _subtree(entry: Entry | None) -> bytes | None:
    return entry.content if entry is not None and entry.kind is EntryKind.DIR else None


def _all_equal(ids: Subtrees) -> bool:
    return all(i == ids[0] for i in ids[1:])


def _folder(read_tree: ReadTree, folder: str, tids: Subtrees) -> Iterator[tuple[str, Sides]]:
    """One folder's names on every side; its trees are read when the walk first asks."""
    listed: dict[bytes, dict[bytes, Entry]] = {}
    for tid in tids:
        if tid is not None and tid not in listed:
            listed[tid] = {e.name: e for e in read_tree(tid)}
    sides = [listed[tid] if tid is not None else {} for tid in tids]
    names: set[bytes] = set()
    for side in sides:
        names.update(side)
    for name in sorted(names):
        yield join(folder, fs_decode(name)), tuple(side.get(name) for side in sides)
