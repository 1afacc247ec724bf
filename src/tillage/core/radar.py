"""The conflict radar, pure: which paths two stored trees differ in, and where the changes of a
workspace and its forks collide.

Places are the workspace and each of its live forks (forks of forks too, named `a/b`). A fork's
own changes are the paths its head differs in from its base. Two forks that are not one above
the other collide where both changed something. A fork and a place above it (its parent, the
workspace, a fork in between) collide where the fork changed something and the place above
changed something since the fork's line left it (its changes since the base of the child on the
way down): what the fork inherited is not a change of either side.

What a place touched (`touched_paths`) is every non-folder path it changed (a file, a symlink,
another non-folder entry: added, changed or deleted) and every folder it removed or made
something else (a file, a symlink). A folder's other changes are the changes of what is in it,
and an added folder counts its contents. Two places' touches overlap (`overlaps`):

- on a path both touched;
- on a path P one touched while the other touched something beneath P: the subtree scope.
  Either P was a folder the first removed or made a file (`lib/` deleted in one, `lib/new.py`
  added in the other), or P is a non-folder on the first side and a folder on the other (a file
  `lib` added in one, `lib/x.py` in the other). Either way the two cannot both land.

A collision is named by the highest path of an overlap: the folder, with both places. What the
same two places touched beneath it is that collision too (a folder removed deleted the file the
other edited), not another one; a third place's own overlap beneath it is its own collision.
A sibling that merely shares a prefix (`lib2/x` against `lib/` removed) is no overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
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
    return frozenset(p for p, leaf in _differences(read_tree, old, new) if leaf)


def touched_paths(read_tree: ReadTree, old: bytes | None, new: bytes | None) -> frozenset[str]:
    """Returns what a place touched from tree `old` to tree `new`: changed_paths() and every
    folder of `old` that is no longer a folder in `new` (removed, or made a file or a symlink).
    Reads what changed_paths() reads."""
    return frozenset(p for p, _leaf in _differences(read_tree, old, new))


def _differences(
    read_tree: ReadTree, old: bytes | None, new: bytes | None
) -> Iterable[tuple[str, bool]]:
    """(path, is a non-folder change) for each non-folder path that differs and each folder
    that is gone (False), in walk order."""
    for path, (before, after) in walk(read_tree, (old, new)):
        was_dir = before is not None and before.kind is EntryKind.DIR
        is_dir = after is not None and after.kind is EntryKind.DIR
        leaf_before = None if was_dir else before
        leaf_after = None if is_dir else after
        if diff_entry(path, leaf_before, leaf_after) is not None:
            yield path, True
        elif was_dir and not is_dir:
            yield path, False


def _above(paths: frozenset[str]) -> frozenset[str]:
    """The folders above the paths (`a`, `a/b` for `a/b/c`): where a touch beneath them is."""
    found: set[str] = set()
    for path in paths:
        cut = path.rfind("/")
        while cut > 0:
            folder = path[:cut]
            if folder in found:
                break  # its own folders are in too
            found.add(folder)
            cut = path.rfind("/", 0, cut)
    return frozenset(found)


class _Touches:
    """One place's touches, with the folders above them computed once however many places
    they are compared with."""

    def __init__(self, paths: frozenset[str]) -> None:
        self.paths = paths
        self._above: frozenset[str] | None = None

    @property
    def above(self) -> frozenset[str]:
        if self._above is None:
            self._above = _above(self.paths)
        return self._above


def overlaps(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    """Returns where two places' touches collide, each collision once, at its highest path
    (see the module docstring): a path both touched, or a path one touched with a touch of
    the other beneath it; a path beneath another of the result is left out."""
    return _overlaps(_Touches(a), _Touches(b))


def _overlaps(a: _Touches, b: _Touches) -> frozenset[str]:
    if not a.paths or not b.paths:
        return frozenset()
    found = (a.paths & b.paths) | (a.paths & b.above) | (b.paths & a.above)
    if len(found) < 2:
        return found
    return frozenset(p for p in found if not _beneath_any(p, found))


def _beneath_any(path: str, folders: Container[str]) -> bool:
    """Tells whether a folder above `path` is among `folders`."""
    cut = path.rfind("/")
    while cut > 0:
        if path[:cut] in folders:
            return True
        cut = path.rfind("/", 0, cut)
    return False


def find_collisions(forks: Sequence[ForkChanges]) -> list[Collision]:
    """Returns every collision, sorted by path (pure; see the module docstring for when two
    places collide and which path names it). `own` and `above` are touched paths
    (touched_paths)."""
    above_of = {f.name: frozenset(f.above) for f in forks}
    places: dict[str, set[str]] = {}

    def related(a: str, b: str) -> bool:
        return a in above_of.get(b, ()) or b in above_of.get(a, ())

    # A place's touches since one base are shared by every fork compared with them.
    known: dict[frozenset[str], _Touches] = {}

    def touches_of(paths: frozenset[str]) -> _Touches:
        found = known.get(paths)
        if found is None:
            found = known[paths] = _Touches(paths)
        return found

    changed = [f for f in forks if f.own]
    for fork in changed:
        own = touches_of(fork.own)
        for name, paths in fork.above.items():
            for path in _overlaps(own, touches_of(paths)):
                places.setdefault(path, set()).update((fork.name, name))
    unrelated = _unrelated_overlaps([(f.name, touches_of(f.own)) for f in changed], related)
    for path, names in unrelated.items():
        places.setdefault(path, set()).update(names)
    return [
        Collision(
            path=path,
            forks=tuple(sorted(n for n in where if n != WORKSPACE)),
            workspace=WORKSPACE in where,
        )
        for path, where in sorted(places.items())
    ]


def _unrelated_overlaps(
    touches: Sequence[tuple[str, _Touches]], related: Callable[[str, str], bool]
) -> dict[str, set[str]]:
    """_overlaps() of every two unrelated forks, as path -> the forks colliding there, found
    through indexes of the touched paths and of the folders above them rather than pair by
    pair: a look at many forks costs about what the paths they touched cost."""
    touching: dict[str, list[int]] = {}
    beneath: dict[str, list[int]] = {}
    for i, (_name, t) in enumerate(touches):
        for path in t.paths:
            touching.setdefault(path, []).append(i)
        for folder in t.above:
            beneath.setdefault(folder, []).append(i)
    # A path one touched with a touch of the other beneath it: the subtree collisions, by pair.
    scoped: dict[tuple[int, int], set[str]] = {}
    for path, here in touching.items():
        for j in beneath.get(path, ()):
            for i in here:
                if i != j:
                    scoped.setdefault((min(i, j), max(i, j)), set()).add(path)

    def collide(path: str, i: int, j: int) -> bool:
        if related(touches[i][0], touches[j][0]):
            return False
        scope = scoped.get((min(i, j), max(i, j)))
        # The same two places' collision above it holds it.
        return scope is None or not _beneath_any(path, scope)

    found: dict[str, set[str]] = {}
    for (i, j), paths in scoped.items():
        for path in paths:
            if collide(path, i, j):
                found.setdefault(path, set()).update((touches[i][0], touches[j][0]))
    for path, here in touching.items():
        if len(here) < 2:
            continue
        # Each fork here collides when one other does with it (mostly the first one tried).
        where = found.setdefault(path, set())
        for i in here:
            if touches[i][0] in where:
                continue
            for j in here:
                if j != i and collide(path, i, j):
                    where.update((touches[i][0], touches[j][0]))
                    break
        if not where:
            del found[path]
    return found


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


# -- claims over a collision ---------------------------------------------------------------

UNCLAIMED = "unclaimed"
COVERED = "covered"
CONTESTED = "contested"


def is_party(collision: Collision, place: str | None) -> bool:
    """Tells whether `place` (WORKSPACE, a fork's name, or None: no place of this look) is
    one of the places colliding."""
    if place is None:
        return False
    return collision.workspace if place == WORKSPACE else place in collision.forks


def claim_state(collision: Collision, holders: Sequence[tuple[str, str | None]]) -> str:
    """What the live claims over a collision say, from each claim's (owner, place that took
    it): UNCLAIMED when there is none; COVERED when every one is held by one owner and was
    taken in one of the colliding places (that owner said it works there: the others walked
    in); CONTESTED otherwise: claims of two or more owners, or a claim taken in a place that
    is not colliding (or not known), so whoever changes it, the claim's holder did not."""
    if not holders:
        return UNCLAIMED
    owners = {owner for owner, _place in holders}
    if len(owners) == 1 and all(is_party(collision, place) for _owner, place in holders):
        return COVERED
    return CONTESTED
