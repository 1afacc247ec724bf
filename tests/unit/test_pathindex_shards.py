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
from typing import Any

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
from tillage.workspace.shards import (
    MIN_SHARDS,
    StaleIndexError,
    StoredShards,
    shard_of,
    shards_for,
)

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


def _shard(ws: Workspace, folder: str) -> int:
    """The shard of `folder`'s entries in the workspace's stored index."""
    return shard_of(folder, pathindex.load(ws.store, ws.id).count)


def _full(ws: Workspace) -> Capture:
    return Walker(ws.root, Policy.load(ws.root), PathIndex(), None, ws.store.tmp_dir, 0).run()


def _index_is_a_full_walks(ws: Workspace) -> None:
    """The stored index holds what a full walk sees: no stale row, none missing."""
    index = pathindex.load(ws.store, ws.id)
    full = _full(ws)
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
    looked_at = {_shard(ws, f) for f in ("", "t07", "t07/s03")}
    assert changed - {("pathindex", ws.id)} <= {("pathshards", s) for s in looked_at}
    assert ("pathshards", _shard(ws, "t07/s03")) in changed
    assert capture.read_files >= 1
    _index_is_a_full_walks(ws)


def test_without_a_watcher_a_one_file_change_still_writes_only_the_shards_that_differ(
    ws: Workspace,
) -> None:
    """A seal with no watcher walks every folder, but of the index it writes only what the
    change made different: a large tree's index is not rewritten for one file."""
    _seal(ws)
    _seal(ws)  # nothing racily clean left from the first
    before = _stored(ws)
    (ws.root / "t07" / "s03" / "f11.txt").write_text("changed, and longer\n")

    capture = _seal(ws)

    assert capture.listed == ALL_FOLDERS
    after = _stored(ws)
    changed = {key for key in after if after[key] != before.get(key)}
    looked_at = {_shard(ws, f) for f in ("", "t07", "t07/s03")}
    assert changed - {("pathindex", ws.id)} <= {("pathshards", s) for s in looked_at}
    assert ("pathshards", _shard(ws, "t07/s03")) in changed
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
            (b"\x28\xb5\x2f\xfd not really zstd", ws.id, _shard(ws, folder)),
        )


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The shards this process reads from the store from now on."""
    read: list[int] = []
    load = StoredShards._load

    def counting(self: StoredShards, shard: int) -> Any:
        read.append(shard)
        return load(self, shard)

    monkeypatch.setattr(StoredShards, "_load", counting)
    return read


@pytest.mark.parametrize("damage", ["garbled", "missing"])
def test_a_seal_that_reaches_a_damaged_shard_reads_everything_and_stores_it_whole(
    ws: Workspace, damage: str
) -> None:
    log = _ready(ws)
    if damage == "garbled":
        _damage(ws, "t02/s05")
    else:
        with ix.write_txn(ws.store.conn):
            ws.store.conn.execute(
                "DELETE FROM pathshards WHERE workspace=? AND shard=?",
                (ws.id, _shard(ws, "t02/s05")),
            )
    (ws.root / "t02" / "s05" / "f00.txt").write_text("changed\n")
    log.note("t02/s05", "f00.txt")

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


def test_a_damaged_shard_a_seal_does_not_reach_costs_nothing_until_one_does(
    ws: Workspace,
) -> None:
    """Shards are read as a walk needs them: damage elsewhere does not turn a one-file
    seal into a full read, and the seal is still exactly what a full walk sees."""
    log = _ready(ws)
    _damage(ws, "t02/s05")
    (ws.root / "t09" / "s09" / "f00.txt").write_text("changed\n")
    log.note("t09/s09", "f00.txt")

    capture = _seal(ws)

    assert capture.listed == 0 and capture.read_files >= 1
    assert capture.root == _full(ws).root
    with pytest.raises(StaleIndexError):
        dict(pathindex.load(ws.store, ws.id).files)  # still damaged where no seal looked


def test_a_one_file_seal_reads_only_the_shards_of_the_folders_it_looks_at(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher's daemon serves the seals of a million-file tree: a seal after one
    changed file reads the shards of that file's folder and of those above it, not the
    whole index, whichever process wrote it."""
    log = _ready(ws)
    read = _reads(monkeypatch)
    (ws.root / "t07" / "s03" / "f11.txt").write_text("changed\n")
    log.note("t07/s03", "f11.txt")

    _seal(ws)

    assert read and set(read) <= {_shard(ws, f) for f in ("", "t07", "t07/s03")}
    _index_is_a_full_walks(ws)


def test_an_index_written_by_another_process_meanwhile_is_not_mixed_in(ws: Workspace) -> None:
    """A reader that loaded the header, then finds a shard of a later generation (another
    process stored the index meanwhile), starts over: it never mixes two indexes."""
    _ready(ws)
    early = pathindex.load(ws.store, ws.id)
    other = pathindex.load(ws.store, ws.id)
    other.update_files({"t00/s00/new.txt": next(iter(other.files.values()))})
    pathindex.save(ws.store, ws.id, other)

    with pytest.raises(StaleIndexError):
        early.files.get("t00/s00/new.txt")
    assert "t00/s00/new.txt" in pathindex.load(ws.store, ws.id).files


def _one_blob_header(ws: Workspace) -> bytes:
    """The header of format 6: one blob of every table."""
    index = pathindex.load(ws.store, ws.id)
    tables = (dict(index.files), dict(index.dirs), dict(index.folders))
    fields = (6, *tables, [], frozenset(), index.token, b"")
    return zstandard.ZstdCompressor(level=1).compress(marshal.dumps(fields))


def _parent_keyed_header(ws: Workspace) -> bytes:
    """A header of format 7, which kept a folder's record in its parent's shard: read with
    today's keys, its shards would give wrong answers."""
    row = ws.store.conn.execute("SELECT data FROM pathindex WHERE workspace=?", (ws.id,)).fetchone()
    fields = list(marshal.loads(zstandard.ZstdDecompressor().decompress(row[0])))
    fields[0] = 7
    return zstandard.ZstdCompressor(level=1).compress(marshal.dumps(tuple(fields)))


@pytest.mark.parametrize("header", [_one_blob_header, _parent_keyed_header])
def test_an_index_of_an_older_format_is_read_in_full_once(ws: Workspace, header: Any) -> None:
    log = _ready(ws)
    blob = header(ws)
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
        _index_is_a_full_walks(ws)


def test_a_small_workspace_keeps_its_index_in_few_shards(ws: Workspace) -> None:
    """Thousands of near-empty shards would each cost a compressed frame and a row: the
    store of a small workspace would be larger for nothing."""
    _seal(ws)
    index = pathindex.load(ws.store, ws.id)
    assert index.count == shards_for(TOP * SUBS * FILES) == MIN_SHARDS
    assert len(index.shards) <= MIN_SHARDS


def test_a_workspace_that_grows_gets_more_shards_and_stays_exact(ws: Workspace) -> None:
    """A delta seal's cost follows the size of the shards it touches: a folder grown past
    four times what its count was chosen for is stored anew in more shards."""
    log = _ready(ws)
    for n in range(12):
        grown = ws.root / "grown" / f"g{n:02d}"
        grown.mkdir(parents=True)
        for f in range(600):
            (grown / f"x{f:03d}.txt").write_text(f"{n}.{f}\n")
    log.note("", "grown")

    _seal(ws)

    index = pathindex.load(ws.store, ws.id)
    assert index.count == shards_for(TOP * SUBS * FILES + 12 * 600) >= 4 * MIN_SHARDS
    _index_is_a_full_walks(ws)
    (ws.root / "t01" / "s01" / "f01.txt").write_text("after\n")
    log.note("t01/s01", "f01.txt")
    assert _seal(ws).listed == 0  # a delta seal again, in the new shards
    _index_is_a_full_walks(ws)


def test_a_loaded_index_stored_whole_keeps_every_entry(ws: Workspace) -> None:
    """A whole save replaces the stored shards: the shards of a loaded index that no walk read
    are read before that, never from the rows it is replacing."""
    _ready(ws)
    index = pathindex.load(ws.store, ws.id)
    index.dirty = None  # as after a landing whose rows lie outside the known folders

    pathindex.save(ws.store, ws.id, index)

    _index_is_a_full_walks(ws)
    assert len(pathindex.load(ws.store, ws.id).shards) > 0


def test_a_workspace_of_symlinks_is_stored_anew_once_not_at_every_seal(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Symlinks count among the files the shard count is chosen for, but have no row: the
    count a whole save chooses must not look outgrown to the next seal."""
    log = _ready(ws)
    links = ws.root / "links"
    links.mkdir()
    for n in range(9_000):
        (links / f"l{n:04d}").symlink_to("../t00/s00/f00.txt")
    log.note("", "links")
    _seal(ws)  # grown past four times its count: stored anew
    count = pathindex.load(ws.store, ws.id).count
    assert count > MIN_SHARDS

    (ws.root / "t01" / "s01" / "f01.txt").write_text("after\n")
    log.note("t01/s01", "f01.txt")
    before = _stored(ws)
    _seal(ws)

    after = _stored(ws)
    changed = {key for key in after if after[key] != before.get(key)}
    assert len(changed) <= 4, "a one-file seal rewrote the whole index"
    assert pathindex.load(ws.store, ws.id).count == count
    _index_is_a_full_walks(ws)


WIDE = 300  # packages in one node_modules-like folder


@pytest.fixture
def wide(tmp_path: Path) -> Iterator[Workspace]:
    folder = tmp_path / "wide"
    for p in range(WIDE):
        package = folder / "node_modules" / f"pkg-{p:03d}" / "lib"
        package.mkdir(parents=True)
        (package / "index.js").write_text(f"module.exports = {p};\n")
        (package.parent / "package.json").write_text(f'{{"name": "pkg-{p:03d}"}}\n')
    (folder / "node_modules" / "link").symlink_to("pkg-000")
    workspace = attach(tmp_path / "store", folder, None).workspace
    try:
        yield workspace
    finally:
        watchstate.register_local(workspace.id, None)
        workspace.store.close()


def test_a_change_below_a_wide_folder_rewrites_none_of_its_siblings_records(
    wide: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node_modules/ of 2,000 packages kept every package's tree ID and summary in one shard,
    which every seal below it rewrote (115 KB of a 1 MiB seal at a million files). Now a
    folder's record is in its own shard: a one-file change reads and writes the shards of the
    folders on its way only, and the totals it gives are a full walk's."""
    log = _ready(wide)
    before = _stored(wide)
    read = _reads(monkeypatch)
    (wide.root / "node_modules" / "pkg-123" / "lib" / "index.js").write_text("changed, longer\n")
    log.note("node_modules/pkg-123/lib", "index.js")

    capture = _seal(wide)

    on_its_way = {
        _shard(wide, f)
        for f in ("", "node_modules", "node_modules/pkg-123", "node_modules/pkg-123/lib")
    }
    assert read and set(read) <= on_its_way
    after = _stored(wide)
    changed = {key for key in after if after[key] != before[key]}
    assert changed - {("pathindex", wide.id)} <= {("pathshards", s) for s in on_its_way}
    # Less than one tree ID (32 bytes) a sibling; and the header's shard generations are an
    # array that compresses to little, not a dict rewritten at every seal.
    rewritten = sum(len(after[key]) for key in changed if key[0] == "pathshards")
    assert rewritten < 32 * WIDE
    assert len(after["pathindex", wide.id]) < 1024
    full = _full(wide)
    assert (capture.files, capture.total_bytes) == (full.files, full.total_bytes)
    index = pathindex.load(wide.store, wide.id)
    assert {p: f[:2] for p, f in index.folders.items()} == {
        p: f[:2] for p, f in full.folders.items()
    }
    _index_is_a_full_walks(wide)


def test_a_package_added_and_one_removed_in_a_wide_folder_keep_the_totals_exact(
    wide: Workspace,
) -> None:
    log = _ready(wide)
    added = wide.root / "node_modules" / "pkg-new"
    added.mkdir()
    (added / "index.js").write_text("new\n")
    shutil.rmtree(wide.root / "node_modules" / "pkg-007")
    (wide.root / "node_modules" / "link").unlink()
    log.note("node_modules", "pkg-new")
    log.note("node_modules", "pkg-007")
    log.note("node_modules", "link")

    capture = _seal(wide)

    assert capture.listed <= 2  # node_modules was not listed whole: only the new package
    full = _full(wide)
    assert (capture.files, capture.total_bytes) == (full.files, full.total_bytes)
    _index_is_a_full_walks(wide)
    assert pathindex.load(wide.store, wide.id).dirs.get("node_modules/pkg-007") is None
