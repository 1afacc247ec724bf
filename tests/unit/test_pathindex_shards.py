"""The path index is stored in shards (issue 26): a seal after one changed file rewrites only
the shards of the folders it looked at again, not the whole index; a shard that does not load,
or an index of the older one-blob format, makes the next seal a full read that still gives
what a full walk gives, and the index it leaves holds exactly what a full walk's would."""

from __future__ import annotations

import marshal
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from tillage.core.changes import ChangeLog
from tillage.store import index as ix
from tillage.workspace import pathindex, watchstate
from tillage.workspace.attach import Workspace, attach
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import Policy
from tillage.workspace.seal import SealOptions, seal_result

TOP, SUBS, FILES = 12, 10, 20  # 12 * 10 folders of 20 files: 2,400 files in 133 folders
ALL_FOLDERS = 1 + TOP + TOP * SUBS


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    folder = tmp_path / "ws"
    for t in range(TOP):
        for s in range(SUBS):
            sub = folder / f"t{t:02d}" / f"s{s:02d}"
            sub.mkdir(parents=True)
            for f in range(FILES):
                (sub / f"f{f:02d}.txt").write_text(f"file {t}.{s}.{f}\n")
    workspace = attach(tmp_path / "store", folder, None).workspace
    try:
        yield workspace
    finally:
        watchstate.register_local(workspace.id, None)
        workspace.store.close()


def _watch(ws: Workspace) -> ChangeLog:
    log = ChangeLog("run1")
    watchstate.register_local(ws.id, log)
    return log


def _seal(ws: Workspace) -> Capture:
    return seal_result(ws, SealOptions(trigger="manual")).capture


def _stored(ws: Workspace) -> dict[tuple[str, object], bytes]:
    """Every stored row of the path index, by (table, key)."""
    conn = ws.store.conn
    rows: dict[tuple[str, object], bytes] = {}
    for ws_id, data in conn.execute("SELECT workspace, data FROM pathindex"):
        rows["pathindex", ws_id] = data
    try:
        shards = conn.execute("SELECT shard, data FROM pathshards WHERE workspace=?", (ws.id,))
        for shard, data in shards:
            rows["pathshards", shard] = data
    except sqlite3.OperationalError:
        pass  # an index with no shards table (the one-blob format)
    return rows


def _full(ws: Workspace) -> Capture:
    return Walker(ws.root, Policy.load(ws.root), PathIndex(), None, ws.store.tmp_dir, 0).run()


def _index_is_a_full_walks(ws: Workspace, *, stored: bool = True) -> None:
    """The stored index (and the one this process keeps) holds what a full walk sees: no
    stale row, none missing."""
    index = kept = pathindex.load(ws.store, ws.id)
    if stored:
        pathindex._CACHE.clear()  # what another process reads: the stored shards
        index = pathindex.load(ws.store, ws.id)
    full = _full(ws)
    assert index == kept
    assert index.files.keys() == full.rows.keys()
    assert index.dirs == full.dirs
    assert index.folders.keys() == full.folders.keys()


def _ready(ws: Workspace) -> ChangeLog:
    log = _watch(ws)
    _seal(ws)  # a full walk, which gets a token
    _seal(ws)
    return log


def test_one_changed_file_rewrites_only_the_shards_of_the_folders_looked_at(
    ws: Workspace,
) -> None:
    log = _ready(ws)
    before = _stored(ws)
    (ws.root / "t07" / "s03" / "f11.txt").write_text("changed\n")
    log.note("t07/s03", "f11.txt")

    capture = _seal(ws)

    after = _stored(ws)
    assert after.keys() == before.keys()
    changed = {key for key in after if after[key] != before[key]}
    rewritten = sum(len(after[key]) for key in changed)
    assert rewritten * 10 < sum(len(data) for data in after.values())
    # The header, and at most the shards of t07/s03 (its files) and of those above it.
    looked_at = {pathindex.shard_of(f) for f in ("", "t07", "t07/s03")}
    assert changed - {("pathindex", ws.id)} <= {("pathshards", s) for s in looked_at}
    assert ("pathshards", pathindex.shard_of("t07/s03")) in changed
    assert capture.read_files >= 1
    _index_is_a_full_walks(ws)


def test_a_removed_folder_leaves_no_stale_rows(ws: Workspace) -> None:
    log = _ready(ws)
    shutil.rmtree(ws.root / "t04")
    log.note("", "t04")
    (ws.root / "t05" / "s01" / "new.txt").write_text("new\n")
    log.note("t05/s01", "new.txt")

    _seal(ws)

    _index_is_a_full_walks(ws)


def _damage(ws: Workspace, folder: str) -> None:
    with ix.write_txn(ws.store.conn):
        ws.store.conn.execute(
            "UPDATE pathshards SET data=? WHERE workspace=? AND shard=?",
            (b"\x28\xb5\x2f\xfd not really zstd", ws.id, pathindex.shard_of(folder)),
        )


def test_a_damaged_shard_makes_the_next_seal_a_full_read_that_is_exact(ws: Workspace) -> None:
    log = _ready(ws)
    _damage(ws, "t02/s05")
    pathindex._CACHE.clear()  # as another process finds it
    assert pathindex.load(ws.store, ws.id) == PathIndex()
    (ws.root / "t09" / "s09" / "f00.txt").write_text("changed\n")
    log.note("t09/s09", "f00.txt")

    capture = _seal(ws)

    full = _full(ws)
    assert capture.listed == ALL_FOLDERS
    assert capture.read_files == capture.files == TOP * SUBS * FILES
    assert (capture.root, capture.files, capture.total_bytes) == (
        full.root,
        full.files,
        full.total_bytes,
    )
    _index_is_a_full_walks(ws)
    assert _seal(ws).listed == 0  # whole again: the next seal is a delta one


def test_a_missing_shard_is_damage_too(ws: Workspace) -> None:
    _ready(ws)
    with ix.write_txn(ws.store.conn):
        ws.store.conn.execute(
            "DELETE FROM pathshards WHERE workspace=? AND shard=?",
            (ws.id, pathindex.shard_of("t01")),
        )
    pathindex._CACHE.clear()
    assert pathindex.load(ws.store, ws.id) == PathIndex()


def test_the_process_that_wrote_the_index_reads_only_its_header_until_another_writes(
    ws: Workspace,
) -> None:
    """The watcher's daemon serves the seals: it keeps the index it saved, and reads the
    shards again only once another process has stored another index."""
    _ready(ws)
    kept = pathindex.load(ws.store, ws.id)
    _damage(ws, "t02/s05")  # unseen while the header is the one this process wrote
    assert pathindex.load(ws.store, ws.id) == kept
    ours = dict(pathindex._CACHE)
    pathindex._CACHE.clear()  # another process: it finds the damage, and stores anew
    other = pathindex.load(ws.store, ws.id)
    assert other == PathIndex()
    other.update_files({"t00/s00/new.txt": next(iter(kept.files.values()))})
    pathindex.save(ws.store, ws.id, other)
    pathindex._CACHE.update(ours)

    assert pathindex.load(ws.store, ws.id).files.keys() == {"t00/s00/new.txt"}


def test_an_index_of_the_one_blob_format_is_read_in_full_once(ws: Workspace) -> None:
    log = _ready(ws)
    index = pathindex.load(ws.store, ws.id)
    fields = (6, index.files, index.dirs, index.folders, [], frozenset(), index.token, b"")
    blob = zstandard.ZstdCompressor(level=1).compress(marshal.dumps(fields))
    with ix.write_txn(ws.store.conn):
        ws.store.conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)", (ws.id, blob)
        )
    assert pathindex.load(ws.store, ws.id) == PathIndex()
    (ws.root / "t00" / "s00" / "f00.txt").write_text("changed\n")
    log.note("t00/s00", "f00.txt")

    capture = _seal(ws)

    assert capture.listed == ALL_FOLDERS
    _index_is_a_full_walks(ws)
    assert _seal(ws).listed == 0


def test_rows_put_in_outside_known_folders_make_the_next_seal_write_it_whole(
    ws: Workspace,
) -> None:
    """A landing's rows may name a folder the index has no tree for (a rewind made it): the
    next seal cannot tell a removal from the folders alone, so it rewrites every shard."""
    log = _ready(ws)
    index = pathindex.load(ws.store, ws.id)
    row = next(iter(index.files.values()))
    index.update_files({"gone/x.txt": row})
    pathindex.save(ws.store, ws.id, index)
    assert pathindex.load(ws.store, ws.id).files["gone/x.txt"] == row
    (ws.root / "t03" / "s03" / "f03.txt").write_text("changed\n")
    log.note("t03/s03", "f03.txt")

    _seal(ws)

    _index_is_a_full_walks(ws)
    assert pathindex.load(ws.store, ws.id).exact


def test_seals_of_changes_of_every_kind_store_what_a_full_walk_sees(ws: Workspace) -> None:
    """Edits, new files and folders, removed and renamed folders, each sealed through the
    watcher's names: after each seal the stored shards hold exactly a full walk's index."""
    log = _ready(ws)
    rng = random.Random(26)
    for step in range(36):
        t, s = f"t{rng.randrange(TOP):02d}", f"s{rng.randrange(SUBS):02d}"
        folder = ws.root / t / s
        if not folder.exists():
            continue
        kind = step % 4
        if kind == 0:
            (folder / "f00.txt").write_text(f"edit {step}\n")
            log.note(f"{t}/{s}", "f00.txt")
        elif kind == 1:
            (folder / f"n{step}").mkdir()
            (folder / f"n{step}" / "x.txt").write_text("new\n")
            log.note(f"{t}/{s}", f"n{step}")
        elif kind == 2:
            shutil.rmtree(folder)
            log.note(t, s)
        else:
            folder.rename(ws.root / t / f"r{step}")
            log.note(t, s)
            log.note(t, f"r{step}")
        _seal(ws)
        _index_is_a_full_walks(ws, stored=step % 6 == 5)  # mostly as the daemon keeps it
