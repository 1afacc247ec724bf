"""Resolving conflicts: `--take` reads each side's version of the taken paths, and a fork that a
`merge --into-fork` left conflicts in lands only once they are settled.

What `merge --into-fork` could not merge stays listed with the fork (`store.fork_pending`): a
text file written with conflict markers is settled once no markers are left in it (or it is
gone); anything else (a binary file, a deletion against an edit, a type change) is settled by
`--take ours|theirs PATH` on the merge that lands it. Until then that merge is refused with each
path and how to settle it, and nothing is sealed or landed by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.models import Entry, EntryKind
from tillage.core.paths import fs_decode, join
from tillage.core.settle import Takes
from tillage.core.textmerge import has_markers
from tillage.store.store import Store
from tillage.workspace.trees import flatten

Manifest = dict[str, Entry]
# Reads a file of the fork's sealed side: (path, entry) -> bytes.
ReadTheirs = Callable[[str, Entry], bytes]


@dataclass(frozen=True)
class Unsettled:
    """A path a merge into the fork left in conflict that is still not settled, and why."""

    path: str
    kind: str
    why: str


def entries_at(
    store: Store, tree: bytes | None, manifest: Manifest | None, roots: Iterable[str]
) -> Manifest:
    """One side's entries at each of `roots`, everything below them and every folder above
    them: from the side's whole manifest when it has one (a live scan), else from its stored
    tree, reading only the folders on the way and the taken subtrees."""
    wanted = sorted(set(roots))
    if manifest is not None:
        return {
            p: e
            for p, e in manifest.items()
            if any(p == r or p.startswith(r + "/") or r.startswith(p + "/") for r in wanted)
        }
    out: Manifest = {}
    if tree is None:
        return out
    for root in wanted:
        folder, tid = "", tree
        parts = root.split("/")
        for depth, name in enumerate(parts):
            entries = {fs_decode(e.name): e for e in codec.decode_tree(store.read(tid))}
            entry = entries.get(name)
            if entry is None:
                break
            path = join(folder, name)
            out[path] = entry
            if entry.kind is not EntryKind.DIR:
                break
            if depth == len(parts) - 1:
                out.update(flatten(store, entry.content, prefix=path))
            folder, tid = path, entry.content
    return out


def unsettled(
    pending: Iterable[tuple[str, str, str]],
    theirs: Manifest,
    read: ReadTheirs,
    takes: Takes,
) -> list[Unsettled]:
    """The fork's pending paths (path, kind, how) this merge does not settle: a file still
    holding conflict markers, or a conflict no `--take` of this merge covers."""
    left: list[Unsettled] = []
    for path, kind, how in pending:
        if takes.side_of(path) is not None:
            continue
        if how == "markers":
            entry = theirs.get(path)
            if entry is None or entry.kind is not EntryKind.FILE:
                continue  # resolved by removing or replacing it
            if has_markers(read(path, entry)):
                left.append(Unsettled(path, kind, "conflict markers are still in it"))
            continue
        left.append(
            Unsettled(path, kind, f"settle it with --take ours {path} or --take theirs {path}")
        )
    return left
