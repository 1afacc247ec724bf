"""Settling a merge's conflicts by taking one side (the pure half of `merge --take`).

`--take ours|theirs PATH...` says: at PATH and everything below it, the result is that side's
version, whatever the plan decided there. The plan is changed accordingly (its landed paths,
line merges and conflicts under PATH give way to the side's entries), and what the result then
holds inside a folder it no longer has is a conflict again, said so: taking a file inside a
folder the other side deleted needs the folder taken too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tillage.core.merge_plan import Conflict, ConflictKind, MergePlan, same
from tillage.core.models import Entry, EntryKind
from tillage.core.paths import ancestors, parse
from tillage.errors import InvalidArgumentError

SIDES = ("ours", "theirs")

Manifest = Mapping[str, Entry]


@dataclass(frozen=True)
class Takes:
    """Paths settled by side: `side_of(path)` is the side of the nearest taken path at or above
    it (None: nothing taken there)."""

    paths: Mapping[str, str]

    def side_of(self, path: str) -> str | None:
        for candidate in (path, *reversed(ancestors(path))):
            side = self.paths.get(candidate)
            if side is not None:
                return side
        return None

    def __bool__(self) -> bool:
        return bool(self.paths)


def parse_takes(words: tuple[str, ...] | None) -> Takes:
    """Reads `--take` words: a side (`ours` or `theirs`), then the paths it settles, and so on
    (`--take ours a.txt --take theirs b/` is `ours a.txt theirs b/`). A path named `ours` is
    written `./ours`. A path taken for both sides is refused."""
    paths: dict[str, str] = {}
    if not words:
        return Takes(paths)
    if words[0] not in SIDES:
        raise InvalidArgumentError(
            f"--take starts with the side to take, ours or theirs, not {words[0]!r}",
            next_step="e.g. `--take theirs app.db`, or `--take ours src/` (ours: the workspace)",
        )
    side = ""
    for word in words:
        if word in SIDES:
            side = word
            continue
        path = parse(word)
        if paths.get(path, side) != side:
            raise InvalidArgumentError(f"{path!r} is taken both as ours and as theirs")
        paths[path] = side
    if not paths or words[-1] in SIDES:
        raise InvalidArgumentError(
            "--take names a side and then the paths it settles",
            next_step="e.g. `--take theirs app.db`",
        )
    return Takes(paths)


def settle(
    plan: MergePlan,
    takes: Takes,
    ours: Manifest,
    at_roots: tuple[Manifest, Manifest],
) -> MergePlan:
    """The plan with every taken path settled. `at_roots` holds each side's entries (ours,
    theirs) at and below every taken path, all of them (a pruned manifest may lack a folder's
    insides); `ours` is the workspace's manifest the plan lands over."""
    if not takes:
        return plan
    ours_at, theirs_at = at_roots
    land: dict[str, Entry | None] = {p: e for p, e in plan.land.items() if takes.side_of(p) is None}
    text = tuple(j for j in plan.text if takes.side_of(j.path) is None)
    conflicts = [c for c in plan.conflicts if takes.side_of(c.path) is None]
    for path in sorted(ours_at.keys() | theirs_at.keys()):
        if takes.side_of(path) == "theirs" and not same(theirs_at.get(path), ours_at.get(path)):
            land[path] = theirs_at.get(path)
        # Ours: nothing lands at or below the path (the workspace's version stays).

    def result(path: str) -> Entry | None:
        if path in land:
            return land[path]
        return ours_at.get(path, ours.get(path))

    conflicts += _homeless(result, [*land, *ours_at], {c.path for c in conflicts})
    return MergePlan(land, text, tuple(sorted(conflicts, key=lambda c: c.path)))


def _homeless(
    result: Callable[[str], Entry | None], paths: list[str], named: set[str]
) -> list[Conflict]:
    """Paths the settled result would hold inside a folder it does not hold (or holds as a
    file): each is a conflict, its reason saying to take the folder too."""
    found: list[Conflict] = []
    for path in sorted(set(paths) - named):
        entry = result(path)
        if entry is None:
            continue
        for folder in ancestors(path):
            holder = result(folder)
            if holder is None or holder.kind is not EntryKind.DIR:
                found.append(
                    Conflict(
                        path,
                        ConflictKind.TYPE_CHANGE,
                        None,
                        None,
                        entry,
                        f"taken, but its folder {folder!r} is not in the result: take it too",
                    )
                )
                break
    return found
