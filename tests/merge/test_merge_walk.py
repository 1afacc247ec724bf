"""The merge reads the three trees only where they differ (workspace.merge.three_way): its plan
must equal the plan over the three trees flattened whole, for any three states of a folder."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tillage.core.merge_plan import plan_merge
from tillage.core.models import EntryKind
from tillage.features.merge.merge import merge_snapshot, three_way
from tillage.platform import failpoints
from tillage.platform.failpoints import FailpointCrashError
from tillage.workspace.attach import attach
from tillage.workspace.journal.intents import intent_path
from tillage.workspace.recovery import recover_if_interrupted
from tillage.workspace.seal import SealOptions, seal
from tillage.workspace.trees import flatten

NAMES = ("a", "b", "c", ".git")


def _random_state(root: Path, rng: random.Random, depth: int = 0) -> None:
    for name in NAMES:
        path = root / name
        roll = rng.random()
        if roll < 0.25:
            continue
        if roll < 0.55 and depth < 3:
            path.mkdir()
            _random_state(path, rng, depth + 1)
        elif roll < 0.65:
            path.symlink_to(rng.choice(["x", "y"]))
        else:
            path.write_text(rng.choice(["1\n", "2\n", "1\n2\n3\n"]))


def _mutate(root: Path, rng: random.Random) -> None:
    """Changes a few things in a copy of the base: edits, deletions, additions."""
    for path in sorted(root.rglob("*"), reverse=True):
        if path.name == ".tillage" or ".tillage" in path.parts:
            continue
        roll = rng.random()
        if roll < 0.1:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        elif roll < 0.25 and path.is_file() and not path.is_symlink():
            path.write_text(rng.choice(["1\n", "2\n", "9\n", "1\n2\n4\n"]))
    if rng.random() < 0.5:
        (root / f"new{rng.randint(0, 2)}").write_text("new\n")


def _reset(folder: Path) -> None:
    for child in folder.iterdir():
        if child.name == ".tillage":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


@pytest.mark.parametrize("seed", range(12))
def test_the_pruned_walk_plans_what_the_whole_trees_plan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    folder = tmp_path / "ws"
    folder.mkdir()
    ws = attach(tmp_path / "store", folder, None).workspace
    _random_state(folder, rng)
    base = seal(ws, SealOptions(trigger="manual"))
    sides = []
    for _ in range(2):
        _reset(folder)
        # Back to the base, then changed: each side diverges from it.
        from tillage.workspace.rewind import apply

        apply(ws, base, None)
        _mutate(folder, rng)
        sides.append(seal(ws, SealOptions(trigger="manual")))
    ours, theirs = sides
    trees = [bytes.fromhex(s.tree) for s in (base, ours, theirs)]
    pruned = plan_merge(*three_way(ws.store, *trees))
    whole = plan_merge(*(flatten(ws.store, t) for t in trees))
    assert pruned.land == whole.land
    assert [(c.path, c.kind) for c in pruned.conflicts] == [
        (c.path, c.kind) for c in whole.conflicts
    ]
    assert [j.path for j in pruned.text] == [j.path for j in whole.text]


def _files(store: Any, tree: str) -> dict[str, tuple[Any, ...]]:
    """A tree's entries but folders' mtimes (writing into a folder changes its mtime)."""
    out: dict[str, tuple[Any, ...]] = {}
    for path, e in flatten(store, bytes.fromhex(tree)).items():
        if e.kind is EntryKind.DIR:
            out[path] = (e.kind, e.mode)
        else:
            out[path] = (e.kind, e.mode, e.content, e.mtime_ns)
    return out


def test_the_result_tree_an_intent_names_is_what_the_merge_seals(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    (folder / "d").mkdir(parents=True)
    (folder / "d" / "x.txt").write_text("one\ntwo\nthree\nfour\n")
    (folder / "e").mkdir()
    ws = attach(tmp_path / "store", folder, None).workspace
    base = seal(ws, SealOptions(trigger="manual"))
    # Theirs: a mode change of folder d, a line edit, a new folder, a deletion.
    (folder / "d").chmod(0o750)
    (folder / "d" / "x.txt").write_text("one\ntwo\nthree\nFOUR\n")
    (folder / "n" / "m").mkdir(parents=True)
    (folder / "n" / "m" / "f").write_text("f\n")
    (folder / "e").rmdir()
    theirs = seal(ws, SealOptions(trigger="manual"))
    from tillage.workspace.rewind import apply

    apply(ws, base, None)
    # Ours: a file added inside d, another line edited.
    (folder / "d" / "mine.txt").write_text("mine\n")
    (folder / "d" / "x.txt").write_text("ONE\ntwo\nthree\nfour\n")
    with failpoints.armed("rewind.before_intent_removed"), pytest.raises(FailpointCrashError):
        merge_snapshot(ws, theirs.id, base.id)
    intent = json.loads(intent_path(ws).read_bytes())
    head = ws.store.head(ws.id)
    assert head is not None and head.trigger == "merge"
    assert _files(ws.store, intent["tree"]) == _files(ws.store, head.tree)
    assert (folder / "d" / "mine.txt").exists() and (folder / "d" / "x.txt").read_text() == (
        "ONE\ntwo\nthree\nFOUR\n"
    )
    # The next command finds the merge sealed already: it only removes the intent.
    assert recover_if_interrupted(ws)
    assert not intent_path(ws).exists()
    assert [s.trigger for s in ws.store.snapshots(ws.id, limit=2)] == ["merge", "pre_merge"]
