"""Planning a three-way merge (the pure half of `till merge`): one decision per path.

Input: three flat manifests (workspace path -> Entry) of the ancestor (`base`), the workspace
(`ours`) and the other side (`theirs`). They may be partial: a folder whose tree is the same on
both sides, or untouched by theirs, need not be listed below its own entry (the walker that
builds them prunes it), since nothing in it can land.

Per path: a side that did not change it yields to the one that did; the same change on both
sides converges; a text file changed on both sides in different places is handed back as a line
merge for the caller (who holds the bytes: core does no I/O). Everything else changed on both
sides differently is a conflict of one of five kinds, named from ours to theirs:

- `modify_modify`: both changed the same file (overlapping lines, binary, a SQLite database,
  a symlink target, different modes, anything under `.git`);
- `modify_delete`: ours changed (or added inside) what theirs deleted;
- `delete_modify`: ours deleted what theirs changed (or added inside);
- `add_add`: both added the path with different contents;
- `type_change`: the sides disagree on what the path is (file, folder, symlink).

`.git` internals are never merged line by line, and git's history is git's to merge: what is
under a `.git` folder is planned path by path (objects are named by their contents, so new
ones from either side land side by side; a ref one side moved lands; a ref both moved is a
conflict) with one rule for the files git rewrites on its own (`index`, reflogs, `FETCH_HEAD`,
...: `git status` alone rewrites the index): they never conflict; changed on both sides, the
side that moved HEAD (whose `logs/HEAD` changed: a commit, a checkout, a reset) has its version
kept, ours when neither did. A `.git` where both sides moved HEAD differently is one conflict at
`.git`, and nothing below it is planned.

Comparisons ignore modification times (a touch is no change anyone merges); a file's content
and its metadata (mode, extended attributes) merge separately, so a mode change on one side and
an edit on the other both land.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from tillage.core.models import Entry, EntryFlag, EntryKind
from tillage.core.paths import ancestors
from tillage.core.treediff import same_content, same_link

Manifest = Mapping[str, Entry]

GIT_DIR = ".git"


class ConflictKind(enum.StrEnum):
    MODIFY_MODIFY = "modify_modify"
    MODIFY_DELETE = "modify_delete"
    DELETE_MODIFY = "delete_modify"
    ADD_ADD = "add_add"
    TYPE_CHANGE = "type_change"


@dataclass(frozen=True, slots=True)
class Conflict:
    """A path the two sides disagree about, with its three entries (None: absent there)."""

    path: str
    kind: ConflictKind
    base: Entry | None
    ours: Entry | None
    theirs: Entry | None
    reason: str


@dataclass(frozen=True, slots=True)
class TextJob:
    """A file both sides changed, to merge line by line; `entry` is the result's entry but for
    its content (mode and attributes already merged), `base`/`ours`/`theirs` the three files."""

    path: str
    base: Entry
    ours: Entry
    theirs: Entry
    entry: Entry


@dataclass(frozen=True)
class MergePlan:
    """What the merge does to the workspace: `land` maps a path to its new entry (None:
    delete it), `text` lists the line merges still to do, `conflicts` what stops the merge."""

    land: dict[str, Entry | None]
    text: tuple[TextJob, ...]
    conflicts: tuple[Conflict, ...]


# Files git rewrites by itself (relative to a `.git` folder); a folder's name ends in "/".
GIT_REWRITTEN = ("index", "FETCH_HEAD", "ORIG_HEAD", "COMMIT_EDITMSG", "AUTO_MERGE", "logs/")
GIT_HEAD_LOG = "logs/HEAD"


def in_git(path: str) -> bool:
    """Tells whether a path is `.git` or lies in one (at any depth: submodules have theirs)."""
    return GIT_DIR in path.split("/")


def _git_dir_of(path: str) -> str | None:
    """The innermost `.git` folder `path` lies in (None: not in one)."""
    parts = path.split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == GIT_DIR:
            return "/".join(parts[: i + 1])
    return None


def _rewritten_by_git(path: str, git_dir: str) -> bool:
    rel = path[len(git_dir) + 1 :]
    return any(rel == r or (r.endswith("/") and rel.startswith(r)) for r in GIT_REWRITTEN)


def _moved_head(git_dir: str, base: Manifest, side: Manifest) -> bool:
    log = f"{git_dir}/{GIT_HEAD_LOG}"
    return log in side and not same(side.get(log), base.get(log))


def _content_eq(a: Entry, b: Entry) -> bool:
    """Same kind and same bytes (or link target, or kind of name); a folder's content is its
    children, planned one by one, so two folders are always the same here."""
    if a.kind != b.kind:
        return False
    if a.kind is EntryKind.DIR:
        return True
    return (
        same_content(a, b)
        and same_link(a, b)
        and (a.flags & EntryFlag.SQLITE_IMAGE) == (b.flags & EntryFlag.SQLITE_IMAGE)
    )


def _meta_eq(a: Entry, b: Entry) -> bool:
    return a.mode == b.mode and a.xattrs == b.xattrs


def same(a: Entry | None, b: Entry | None) -> bool:
    """Tells whether two entries are the same for a merge: content and metadata, not mtime."""
    if a is None or b is None:
        return a is b
    return _content_eq(a, b) and _meta_eq(a, b)


def _tree_changed_both(base: Entry | None, ours: Entry | None, theirs: Entry | None) -> bool:
    """A folder whose tree both sides changed, differently (its tree IDs pairwise differ)."""
    if base is None or ours is None or theirs is None:
        return False
    if not (base.kind is ours.kind is theirs.kind is EntryKind.DIR):
        return False
    return len({base.content, ours.content, theirs.content}) == 3


def _line_mergeable(path: str, *entries: Entry) -> bool:
    return not in_git(path) and all(
        e.kind is EntryKind.FILE and not e.flags & (EntryFlag.SQLITE_IMAGE | EntryFlag.HARDLINK)
        for e in entries
    )


def _both_changed(
    path: str, base: Entry | None, ours: Entry | None, theirs: Entry | None
) -> Conflict | TextJob | Entry:
    """Decides a path both sides changed, differently: a conflict, a line merge, or the
    result's entry (content from one side, metadata from the other)."""

    def conflict(kind: ConflictKind, reason: str) -> Conflict:
        return Conflict(path, kind, base, ours, theirs, reason)

    if ours is None:
        return conflict(ConflictKind.DELETE_MODIFY, "deleted here, changed in theirs")
    if theirs is None:
        return conflict(ConflictKind.MODIFY_DELETE, "changed here, deleted in theirs")
    if base is None:
        if ours.kind != theirs.kind:
            return conflict(ConflictKind.TYPE_CHANGE, "added as different kinds on both sides")
        return conflict(ConflictKind.ADD_ADD, "added on both sides with different contents")
    if ours.kind != theirs.kind or ours.kind != base.kind:
        return conflict(ConflictKind.TYPE_CHANGE, "changed to different kinds on both sides")
    # Same kind everywhere: content and metadata merge separately.
    if _meta_eq(ours, theirs) or _meta_eq(theirs, base):
        meta = ours
    elif _meta_eq(ours, base):
        meta = theirs
    else:
        return conflict(ConflictKind.MODIFY_MODIFY, "both sides changed its mode differently")
    if _content_eq(ours, theirs) or _content_eq(theirs, base):
        source = ours
    elif _content_eq(ours, base):
        source = theirs
    elif _line_mergeable(path, base, ours, theirs):
        return TextJob(path, base, ours, theirs, replace(ours, mode=meta.mode, xattrs=meta.xattrs))
    elif in_git(path):
        return conflict(ConflictKind.MODIFY_MODIFY, "git's own files are never merged")
    elif ours.kind is EntryKind.SYMLINK:
        return conflict(ConflictKind.MODIFY_MODIFY, "both sides changed the link's target")
    elif any(e.flags & EntryFlag.SQLITE_IMAGE for e in (base, ours, theirs)):
        return conflict(
            ConflictKind.MODIFY_MODIFY,
            "a SQLite database changed on both sides (databases are not merged row by row)",
        )
    else:
        return conflict(ConflictKind.MODIFY_MODIFY, "binary file changed on both sides")
    return replace(source, mode=meta.mode, xattrs=meta.xattrs)


def _decide(
    path: str, base: Entry | None, ours: Entry | None, theirs: Entry | None
) -> Conflict | TextJob | Entry | bool | None:
    """One path's decision: False (keep ours), an entry or None (land it), a line merge, or a
    conflict."""
    if same(ours, theirs) or same(theirs, base):
        return False
    if same(ours, base):
        return theirs
    decided = _both_changed(path, base, ours, theirs)
    if isinstance(decided, Entry) and same(decided, ours):
        return False
    return decided


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def plan_merge(base: Manifest, ours: Manifest, theirs: Manifest) -> MergePlan:
    """Plans the merge of base→theirs into ours (see the module's doc)."""
    land: dict[str, Entry | None] = {}
    jobs: list[TextJob] = []
    conflicts: list[Conflict] = []
    blocked: list[str] = []  # `.git` folders in conflict: nothing below them is planned
    owners: dict[str, Manifest] = {}  # per `.git` folder: the side owning what git rewrites
    for path in sorted(base.keys() | ours.keys() | theirs.keys()):
        if blocked and any(path.startswith(b + "/") for b in blocked):
            continue
        b, o, t = base.get(path), ours.get(path), theirs.get(path)
        if path.rsplit("/", 1)[-1] == GIT_DIR and _tree_changed_both(b, o, t):
            ours_moved, theirs_moved = (_moved_head(path, base, m) for m in (ours, theirs))
            log = f"{path}/{GIT_HEAD_LOG}"
            if ours_moved and theirs_moved and not same(ours.get(log), theirs.get(log)):
                blocked.append(path)
                conflicts.append(
                    Conflict(
                        path,
                        ConflictKind.MODIFY_MODIFY,
                        b,
                        o,
                        t,
                        "both sides moved git's HEAD (committed, checked out or reset): git's "
                        "history is merged with git (fetch the other side's commits)",
                    )
                )
                continue
            owners[path] = theirs if theirs_moved else ours
        git_dir = _git_dir_of(path)
        decided = _decide(path, b, o, t)
        if isinstance(decided, Conflict) and git_dir in owners and _rewritten_by_git(path, git_dir):
            decided = t if owners[git_dir] is theirs else False  # rewritten: never a conflict
        if decided is False:
            continue
        if isinstance(decided, Conflict):
            conflicts.append(decided)
        elif isinstance(decided, TextJob):
            jobs.append(decided)
        elif decided is None or isinstance(decided, Entry):
            land[path] = decided
    stopped = {c.path for c in conflicts}
    conflicts += _orphans(base, ours, theirs, land, {j.path for j in jobs}, stopped)
    conflicts += _folders_made_files(base, ours, theirs, land, conflicts)
    return MergePlan(land, tuple(jobs), tuple(sorted(conflicts, key=lambda c: c.path)))


def _folders_made_files(
    base: Manifest,
    ours: Manifest,
    theirs: Manifest,
    land: dict[str, Entry | None],
    conflicts: list[Conflict],
) -> list[Conflict]:
    """A folder one side made a file (or a link) while the other changed what is inside: the
    path inside is its own conflict, and so is the folder, named once (else it would land as
    a file over a conflict, and nothing would say what to settle). Its landing is withdrawn."""
    named = {c.path for c in conflicts}
    found: list[Conflict] = []
    for folder in sorted({a for c in conflicts for a in ancestors(c.path)} - named):
        result = land[folder] if folder in land else ours.get(folder)
        if result is None or result.kind is EntryKind.DIR:
            continue
        sides = (ours.get(folder), theirs.get(folder))
        if not any(e is not None and e.kind is EntryKind.DIR for e in sides):
            continue
        land.pop(folder, None)
        found.append(
            Conflict(
                folder,
                ConflictKind.TYPE_CHANGE,
                base.get(folder),
                sides[0],
                sides[1],
                "a file on one side, a folder with changes inside on the other",
            )
        )
    return found


def _orphans(
    base: Manifest,
    ours: Manifest,
    theirs: Manifest,
    land: Mapping[str, Entry | None],
    merged: set[str],
    stopped: set[str],
) -> list[Conflict]:
    """Conflicts of paths the result would hold inside a folder it would not: theirs added or
    changed something in a folder ours deleted (or made a file), or the other way round. A path
    already in conflict, and what lies below it, is that conflict: one path, one conflict (else
    which side made the folder go would decide how often a path is named)."""

    def exists(path: str) -> bool:
        if path in merged:
            return True
        return land[path] is not None if path in land else path in ours

    def result(path: str) -> Entry | None:
        return land[path] if path in land else ours.get(path)

    found: list[Conflict] = []
    candidates = {*land, *merged, *(p for p in ours if _parent(p) in land)}
    for path in sorted(candidates):
        parent = _parent(path)
        if not parent or not exists(path) or any(a in stopped for a in (*ancestors(path), path)):
            continue
        folder = result(parent)
        if folder is not None and folder.kind is EntryKind.DIR:
            continue
        if folder is None and parent in land:
            kind, why = ConflictKind.MODIFY_DELETE, "its folder was deleted in theirs"
        elif folder is None:
            kind, why = ConflictKind.DELETE_MODIFY, "its folder was deleted here"
        else:
            kind, why = ConflictKind.TYPE_CHANGE, "its folder is no longer a folder"
        found.append(Conflict(path, kind, base.get(path), ours.get(path), theirs.get(path), why))
    return found


def _identity(entry: Entry | None) -> list[object] | None:
    """What a digest holds of an entry: all a merge lands but its modification time (and a
    folder's tree, whose contents are planned path by path)."""
    if entry is None:
        return None
    content = b"" if entry.kind is EntryKind.DIR else entry.content
    return [
        int(entry.kind),
        entry.mode,
        entry.size if entry.kind is not EntryKind.DIR else 0,
        int(entry.content_kind) if entry.kind is not EntryKind.DIR else 0,
        content.hex(),
        [[k.hex(), v.hex()] for k, v in entry.xattrs],
        int(entry.flags & (EntryFlag.SQLITE_IMAGE | EntryFlag.HARDLINK)),
        entry.link.hex(),
    ]


def preview_digest(
    base: str,
    ours: Manifest,
    land: Mapping[str, Entry | None],
    conflicts: Iterable[Conflict],
) -> str:
    """The digest of what a merge would do: its ancestor, each landed path as it is in ours and
    as it would be, and each conflict. A dry run and the merge after it agree on it exactly
    when the merge would land what was previewed (`merge --expect`), whatever else changed."""
    import json

    doc = {
        "base": base,
        "land": [[p, _identity(ours.get(p)), _identity(land[p])] for p in sorted(land)],
        "conflicts": sorted([c.path, str(c.kind)] for c in conflicts),
    }
    encoded = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()
