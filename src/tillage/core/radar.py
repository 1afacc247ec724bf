"""The conflict radar, pure: which paths two stored trees differ in, and where the changes of a
workspace and its forks collide.

Places are the workspace and each of its live forks (forks of forks too, named `a/b`). A fork's
own changes are the paths its head differs in from its base. Two forks that are not one above
the other collide on a path both changed. A fork and a place above it (its parent, the
workspace, a fork in between) collide on a path the fork changed and the place above changed
since the fork's line left it (its changes since the base of the child on the way down): what
the fork inherited is not a change of either side.

Only files, symlinks and other non-folder entries are paths here: a folder's change is the
change of what is in it, and an added or deleted folder counts its contents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tillage.core.models import Entry, EntryKind
from tillage.core.treediff import diff_entry
from tillage.core.treewalk import walk

# Reads a stored tree (by ID) as its entries.
ReadTree = Callable[[bytes], Sequence[Entry]]

# The key of the workspace itself among the places (fork names are slugs, never empty).
WORKSPACE = ""


@dataclass(frozen=True)
class Collision:
    """A path changed in two or more places: the forks (by name) and whether the workspace is
    one of them."""

    path: str
    forks: tuple[str, ...]
    workspace: bool


@dataclass(frozen=True)
class ForkChanges:
    """One fork's side of the radar: `own`, the paths it changed since its base; `above`, for
    each place above it (WORKSPACE or a fork's name), the paths that place changed since the
    fork's line left it (only those among `own` matter)."""

    name: str
    own: frozenset[str]
    above: Mapping[str, frozenset[str]]


def changed_paths(read_tree: ReadTree, old: bytes | None, new: bytes | None) -> frozenset[str]:
    """Returns the non-folder paths that differ between two trees (None: the empty tree),
    descending only into subfolders whose tree IDs differ, so two sealed states of a large
    workspace that differ in a few files cost a few tree reads."""
    found: set[str] = set()
    for path, (before, after) in walk(read_tree, (old, new)):
        leaf_before = before if before and before.kind is not EntryKind.DIR else None
        leaf_after = after if after and after.kind is not EntryKind.DIR else None
        if diff_entry(path, leaf_before, leaf_after) is not None:
            found.add(path)
    return frozenset(found)


def find_collisions(forks: Sequence[ForkChanges]) -> list[Collision]:
    """Returns every path changed in two or more places, sorted by path (pure; see the module
    docstring for when two places collide)."""
    above_of = {f.name: frozenset(f.above) for f in forks}
    places: dict[str, set[str]] = {}

    def related(a: str, b: str) -> bool:
        return a in above_of.get(b, ()) or b in above_of.get(a, ())

    touched: dict[str, list[str]] = {}
    for fork in forks:
        for path in fork.own:
            touched.setdefault(path, []).append(fork.name)
        for name, paths in fork.above.items():
            for path in fork.own & paths:
                places.setdefault(path, set()).update((fork.name, name))
    for path, names in touched.items():
        if len(names) < 2:
            continue
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if not related(a, b):
                    places.setdefault(path, set()).update((a, b))
    return [
        Collision(
            path=path,
            forks=tuple(sorted(n for n in where if n != WORKSPACE)),
            workspace=WORKSPACE in where,
        )
        for path, where in sorted(places.items())
    ]


def by_fork(collisions: Iterable[Collision]) -> dict[str, tuple[str, ...]]:
    """Groups collisions by fork: each fork's colliding paths, sorted."""
    out: dict[str, list[str]] = {}
    for c in collisions:
        for name in c.forks:
            out.setdefault(name, []).append(c.path)
    return {name: tuple(sorted(paths)) for name, paths in out.items()}


@dataclass(frozen=True)
class Transition:
    """A collision that opened, changed (its places did) or resolved since the last look."""

    path: str
    forks: tuple[str, ...]
    workspace: bool
    state: str  # "opened" | "changed" | "resolved"


def transitions(
    before: Mapping[str, tuple[tuple[str, ...], bool]], now: Iterable[Collision]
) -> list[Transition]:
    """Returns what happened between two looks (`before`: path -> (forks, workspace)), sorted
    by path; a resolved collision names the places it had."""
    out: list[Transition] = []
    seen: set[str] = set()
    for c in now:
        seen.add(c.path)
        old = before.get(c.path)
        if old is None:
            out.append(Transition(c.path, c.forks, c.workspace, "opened"))
        elif old != (c.forks, c.workspace):
            out.append(Transition(c.path, c.forks, c.workspace, "changed"))
    for path, (forks, workspace) in before.items():
        if path not in seen:
            out.append(Transition(path, forks, workspace, "resolved"))
    return sorted(out, key=lambda t: t.path)
