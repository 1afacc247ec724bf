"""A seal through a watcher's changed folders equals a full walk of the same folder.

Random edits (files created, rewritten, appended to, renamed, deleted; folders made, removed
with all they hold, renamed, chmod'ed, given an xattr; symlinks; hard links) are applied to a
real folder, and the test notes in a ChangeLog the folders each edit touched, as the watcher does:
the parent of every name created, deleted, renamed or modified, and a folder itself for a change
of its own attributes. After each round, a seal that lists only those folders must give the root
tree, files, bytes, notes and path index a fresh full walk gives.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.changes import ChangeLog
from tillage.core.paths import CONTROL_DIR
from tillage.workspace import watchstate
from tillage.workspace.attach import attach
from tillage.workspace.capture import Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import Policy
from tillage.workspace.seal import SealOptions, seal_result

KINDS = (
    "create",
    "modify",
    "append",
    "delete",
    "mkdir",
    "rmtree",
    "rename_dir",
    "rename_file",
    "chmod",
    "symlink",
    "hardlink",
    "xattr_dir",
)
Op = tuple[str, int, int, bytes]
ops = st.tuples(
    st.sampled_from(KINDS), st.integers(0, 63), st.integers(0, 63), st.binary(max_size=48)
)
rounds = st.lists(st.lists(ops, max_size=6), min_size=1, max_size=4)


def _start(root: Path) -> None:
    for folder in ("a/b", "c/d/e", "f"):
        (root / folder).mkdir(parents=True)
    for i, folder in enumerate(("", "a", "a/b", "c", "c/d", "c/d/e", "f")):
        for j in range(2):
            (root / folder / f"x{j}.txt").write_text(f"{folder} {i} {j}\n" * (j + 1))


def _listing(root: Path) -> tuple[list[str], list[str]]:
    """The folders (the root is "") and the regular files below `root`, sorted."""
    dirs, files = [""], []
    for top, subdirs, names in os.walk(root):
        rel = os.path.relpath(top, root)
        rel = "" if rel == "." else rel
        if not rel:
            subdirs[:] = [d for d in subdirs if d != CONTROL_DIR]
        dirs.extend(f"{rel}/{d}".lstrip("/") for d in subdirs)
        for name in names:
            path = f"{rel}/{name}".lstrip("/")
            if (root / path).is_file() and not (root / path).is_symlink():
                files.append(path)
    return sorted(dirs), sorted(files)


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _base(path: str) -> str:
    return path.rpartition("/")[2]


def _apply(root: Path, op: Op, log: ChangeLog, by_name: bool) -> None:
    """Applies one edit and notes what a watcher would; an edit that does not fit is skipped.

    With `by_name`, as the watcher does: the name that changed in its folder (a new folder
    whole, with everything in it; a folder's own attribute change also whole, from its own
    watch). Without: only the folders, as a watcher that names nothing would."""

    def note(path: str, whole_folder: str | None = None) -> None:
        if by_name:
            log.note(_parent(path), _base(path))
            if whole_folder is not None:
                log.note(whole_folder)
        else:
            log.note(whole_folder if whole_folder is not None else _parent(path))

    kind, a, b, data = op
    dirs, files = _listing(root)
    inner = dirs[1:]
    folder = dirs[a % len(dirs)]
    if kind in ("create", "mkdir", "symlink"):
        path = f"{folder}/{kind[0]}{b}".lstrip("/")
        if os.path.lexists(root / path):
            return
        if kind == "create":
            (root / path).write_bytes(data)
        elif kind == "mkdir":
            (root / path).mkdir()
        else:
            os.symlink(f"target{len(data)}", root / path)
        note(path)
        if kind == "mkdir" and by_name:
            log.note(path)  # a new folder is watched and noted whole
    elif kind in ("modify", "append", "delete", "hardlink", "rename_file") and files:
        path = files[a % len(files)]
        if kind == "modify":
            (root / path).write_bytes(data)
        elif kind == "append":
            with (root / path).open("ab") as f:
                f.write(data + b".")
        elif kind == "delete":
            (root / path).unlink()
        else:
            into = dirs[b % len(dirs)]
            name = f"{into}/{kind[0]}{len(data)}".lstrip("/")
            if os.path.lexists(root / name):
                return
            if kind == "hardlink":
                os.link(root / path, root / name)
            else:
                (root / path).rename(root / name)
                note(path)
            note(name)  # a new link: only where the name appeared, the other sees nothing
            return
        note(path)
    elif kind == "rmtree" and inner:
        gone = inner[a % len(inner)]
        for d in dirs:
            if d == gone or d.startswith(gone + "/"):
                log.note(d)  # every name below it is deleted
        shutil.rmtree(root / gone)
        note(gone)
    elif kind == "rename_dir" and inner:
        src = inner[a % len(inner)]
        outside = [d for d in dirs if d != src and not d.startswith(src + "/")]
        dest_parent = outside[b % len(outside)]
        dest = f"{dest_parent}/r{len(data)}".lstrip("/")
        if os.path.lexists(root / dest):
            return
        (root / src).rename(root / dest)
        note(src)
        note(dest)
        if by_name:  # the watcher watches the moved-in folders afresh and notes them whole
            for d in _listing(root)[0]:
                if d == dest or d.startswith(dest + "/"):
                    log.note(d)
    elif kind == "chmod":
        targets = inner + files
        if not targets:
            return
        path = targets[a % len(targets)]
        is_dir = (root / path).is_dir()
        modes = (0o755, 0o700) if is_dir else (0o644, 0o600)
        os.chmod(root / path, modes[b % 2])
        note(path, path if is_dir else None)
    elif kind == "xattr_dir" and inner:
        path = inner[a % len(inner)]
        os.setxattr(root / path, "user.k", data or b"-")
        note(path, path)


@examples(40)
@given(rounds=rounds, by_name=st.booleans())
def test_a_delta_seal_equals_a_full_walk(rounds: list[list[Op]], by_name: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        folder.mkdir()
        _start(folder)
        ws = attach(Path(tmp) / "store", folder, None).workspace
        log = ChangeLog("prop")
        watchstate.register_local(ws.id, log)
        try:
            options = SealOptions(trigger="manual")
            seal_result(ws, options)  # the full walk that gets the first token
            for edits in rounds:
                for op in edits:
                    _apply(folder, op, log, by_name)
                delta = seal_result(ws, options).capture
                full = Walker(folder, Policy([]), PathIndex(), None, ws.store.tmp_dir, 0).run()
                assert delta.root == full.root
                assert (delta.files, delta.total_bytes) == (full.files, full.total_bytes)
                assert delta.notes == full.notes
                assert delta.rows.keys() == full.rows.keys()
                assert delta.dirs == full.dirs
                assert delta.folders.keys() == full.folders.keys()
                assert delta.links == full.links
        finally:
            watchstate.register_local(ws.id, None)
            ws.store.close()
