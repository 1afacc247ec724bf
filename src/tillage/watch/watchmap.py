"""Which folder each inotify watch descriptor stands for, and which watched folders lie below
a folder: pure bookkeeping, so that forgetting a subtree costs that subtree.

A folder created, moved or deleted forgets the watches at and below it. Scanning every watch
for the prefix made that cost the whole tree per folder event: a rewind landing 1,100 folders
into a watched workspace spent 0.4 s of the reader thread's time in that scan alone, and at a
million files (126,000 watches) every such event cost a scan of all of them.
"""

from __future__ import annotations

from collections.abc import Iterator


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


class WatchMap:
    """Watch descriptors by folder (folder-relative, "" the workspace) and back.

    Every folder added is linked under its parent's path, and so on up, watched or not:
    forgetting a path reaches everything ever added below it, also folders whose watch
    outlived their name (the kernel told the same descriptor under a new name), just as a
    prefix scan would.
    """

    def __init__(self) -> None:
        self._rel_for_wd: dict[int, str] = {}
        self._wd_for_rel: dict[str, int] = {}
        self._kids: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._wd_for_rel)

    def __contains__(self, rel: object) -> bool:
        return rel in self._wd_for_rel

    def rels(self) -> Iterator[str]:
        """The watched folders, in no particular order."""
        return iter(self._wd_for_rel)

    def folder(self, wd: int) -> str | None:
        """The folder watch `wd` stands for; None for one forgotten (or never ours)."""
        return self._rel_for_wd.get(wd)

    def add(self, rel: str, wd: int) -> None:
        """Records that `wd` watches `rel`. The kernel answers an already watched folder with
        its descriptor: seen under another name, the folder moved, and the old name goes."""
        old = self._rel_for_wd.get(wd)
        if old is not None and old != rel and self._wd_for_rel.get(old) == wd:
            del self._wd_for_rel[old]
        replaced = self._wd_for_rel.get(rel)
        if replaced is not None and replaced != wd:
            self._rel_for_wd.pop(replaced, None)  # a folder made anew at the path
        self._rel_for_wd[wd] = rel
        self._wd_for_rel[rel] = wd
        while rel:  # linked up to the first folder already linked (the walks add parents first)
            parent = _parent(rel)
            kids = self._kids.setdefault(parent, set())
            if rel in kids:
                break
            kids.add(rel)
            rel = parent

    def forget_tree(self, rel: str) -> list[int]:
        """Forgets `rel` and every folder below it ("" forgets all); returns the descriptors
        to remove from the inotify instance."""
        if not rel:
            return self._forget_all()
        siblings = self._kids.get(_parent(rel))
        if siblings is not None:
            siblings.discard(rel)
        gone: list[int] = []
        stack = [rel]
        while stack:
            current = stack.pop()
            wd = self._wd_for_rel.pop(current, None)
            if wd is not None:
                del self._rel_for_wd[wd]
                gone.append(wd)
            stack.extend(self._kids.pop(current, ()))
        return gone

    def forget_all_but_root(self) -> list[int]:
        """Forgets every folder but the workspace's own; returns their descriptors."""
        root = self._wd_for_rel.get("")
        gone = self._forget_all()
        if root is not None:
            gone.remove(root)
            self.add("", root)
        return gone

    def _forget_all(self) -> list[int]:
        gone = list(self._rel_for_wd)
        self._rel_for_wd.clear()
        self._wd_for_rel.clear()
        self._kids.clear()
        return gone
