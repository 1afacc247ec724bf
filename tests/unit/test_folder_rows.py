"""A walk keeps each finished folder's path-index rows as one blob (issue 26): a cold seal of a
large tree holds a fraction of the memory a row object per file took, and every entry comes
back whole, from the walk, from a table made of it and from the index a seal stored."""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace, attach
from tillage.workspace.capture import Walker
from tillage.workspace.folderrows import FolderRows
from tillage.workspace.pathindex import PathIndex, Row
from tillage.workspace.policy import Policy
from tillage.workspace.seal import SealOptions, seal_result
from tillage.workspace.shards import Table

TOP, SUBS, FILES = 8, 10, 40  # 3,200 files in 89 folders


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    folder = tmp_path / "ws"
    for t in range(TOP):
        for s in range(SUBS):
            sub = folder / f"node_modules/pkg{t:02d}/lib{s:02d}"
            sub.mkdir(parents=True)
            for f in range(FILES):
                (sub / f"module-{f:02d}.js").write_text(f"exports.v = {t}.{s}.{f}\n")
    workspace = attach(tmp_path / "store", folder, None).workspace
    try:
        yield workspace
    finally:
        workspace.store.close()


def _walk(ws: Workspace) -> Walker:
    return Walker(ws.root, Policy([]), PathIndex(), None, ws.store.tmp_dir, time.time_ns())


def test_a_walk_holds_its_rows_in_a_fraction_of_a_row_object_per_file(ws: Workspace) -> None:
    _walk(ws).run()  # every module and cache the walk touches is loaded before measuring
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        capture = _walk(ws).run()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(capture.rows) == TOP * SUBS * FILES
    # A row object per file (path, 12-tuple, its ints and content ID, a dict slot) held about
    # 450 bytes here; a folder's rows as one blob about 110, its folder's entries aside.
    assert held / len(capture.rows) < 250, held / len(capture.rows)


def test_a_cold_seals_index_gives_every_entry_of_its_walk_back(ws: Workspace) -> None:
    capture = seal_result(ws, SealOptions(trigger="manual")).capture
    walked = dict(capture.rows)
    assert len(walked) == TOP * SUBS * FILES
    loaded = pathindex.load(ws.store, ws.id)
    assert dict(loaded.files) == walked
    assert dict(loaded.dirs) == dict(capture.dirs)
    assert len(loaded.files) == len(walked)
    assert loaded.exact


def _row(size: int, content: bytes) -> Row:
    return (size, 1, 1, size, 65024, 33188, "", 1, content, 0, size, ())


def _rows(folder: str, n: int) -> dict[str, Row]:
    prefix = f"{folder}/" if folder else ""
    return {f"{prefix}f{i}": _row(i, bytes([i]) * 32) for i in range(n)}


def test_a_frozen_folder_answers_as_before_and_changes_like_any_other() -> None:
    rows = FolderRows()
    expected = {**_rows("", 3), **_rows("a", 5), **_rows("a/b", 4)}
    for path, row in expected.items():
        rows[path] = row
    rows.freeze("a")
    rows.freeze("a/b")
    assert [folder for folder, _n, _blob in rows.frozen()] == ["a", "a/b"]
    # A decoded row shares the device and mode ints every row of a walk shares.
    assert rows["a/f1"][4] is rows["a/b/f1"][4] and rows["a/f1"][5] is rows["a/b/f1"][5]
    assert dict(rows.items()) == expected and len(rows) == len(expected)
    assert rows["a/f2"] == expected["a/f2"] and "a/f9" not in rows and rows.get("a/b/f9") is None
    rows["a/f2"] = _row(99, b"new")
    del rows["a/b/f0"]
    rows["a/b/f7"] = _row(7, b"seven")
    expected["a/f2"] = _row(99, b"new")
    del expected["a/b/f0"]
    expected["a/b/f7"] = _row(7, b"seven")
    assert dict(rows.items()) == expected and len(rows) == len(expected)
    with pytest.raises(KeyError):
        del rows["a/b/f0"]


def test_a_table_made_of_frozen_folders_decodes_a_shard_only_when_asked() -> None:
    rows = FolderRows()
    expected = {**_rows("x", 6), **_rows("x/y", 3), **_rows("z", 2)}
    for path, row in expected.items():
        rows[path] = row
    rows.freeze("x")
    rows.freeze("x/y")
    table = Table.of(rows, 64)
    regrouped = Table.of(table, 256)  # as a whole save regroups: the blobs move undecoded
    for t in (table, regrouped):
        assert sorted(f for f, _n, _b in t.frozen()) == ["x", "x/y"]
        assert dict(t.items()) == expected and len(t) == len(expected)
        assert set(t.folders()) == {"x", "x/y", "z"}
    shard = next(s for s in regrouped.shards() if "x/f0" in regrouped.view(s))
    assert "x" in [f for f, _n, _b in regrouped.frozen()]  # a view leaves it a blob
    copy = regrouped.fork()
    regrouped["x/f0"] = _row(0, b"changed")
    assert "x" not in [f for f, _n, _b in regrouped.frozen()]
    assert regrouped.part(shard)["x/f0"] == _row(0, b"changed")
    assert copy["x/f0"] == expected["x/f0"] and dict(copy.items()) == expected
