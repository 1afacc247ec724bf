"""Verifying a store: every pack record, every indexed object, every published snapshot.

Repair salvages the log, copies a damaged pack's whole records into a new pack, and rebuilds the
advisory index (so damaged records are no longer served) (INV-3, INV-4, INV-6).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from tillage.core import codec
from tillage.core.classes import ClassRules, class_of
from tillage.core.codec import Kind
from tillage.core.models import ContentKind, EntryKind
from tillage.core.progress import ProgressFn, meter
from tillage.errors import IntegrityError
from tillage.platform.fs import TEMP_MARK, fsync_dir
from tillage.platform.locks import file_lock
from tillage.store.packs import (
    NEW_SUFFIX,
    PackScan,
    PackWriter,
    being_written,
    iter_packs,
    scan_pack,
)
from tillage.store.store import Store


@dataclass
class CheckReport:
    objects: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    repaired: int = 0
    damaged_snapshots: list[str] = field(default_factory=list)
    # Problems found before a repair fixed them (empty without --repair).
    fixed: list[tuple[str, str]] = field(default_factory=list)
    reclaimed_packs: int = 0
    reclaimed_bytes: int = 0


def check_store(
    store: Store, *, repair: bool, on_progress: ProgressFn | None = None
) -> CheckReport:
    """Checks the log, every pack, every indexed object and every published snapshot.

    `problems` lists what is wrong; with `repair`, the log is salvaged, damaged packs are
    rewritten without their damage, the index is rebuilt and damaged objects are no longer
    served (`repaired` counts those fixes), and `problems` is the state after repairing.
    Snapshots that reach a lost object stay listed in `damaged_snapshots` until a seal of the
    same bytes heals them. Either way, packs that killed writers left behind (nothing indexes
    them and no writer holds them) are reclaimed: they were never published, so they are not
    damage. `on_progress` hears three stages: the packs, the objects and the snapshots.
    """
    reclaimed_packs, reclaimed_bytes = reclaim_abandoned_packs(store)
    _remove_stale_temp_files(store)
    report = _check(store, repair=repair, on_progress=on_progress)
    report.reclaimed_packs, report.reclaimed_bytes = reclaimed_packs, reclaimed_bytes
    return report


def reclaim_abandoned_packs(store: Store) -> tuple[int, int]:
    """Deletes packs that no index row points into and no live writer holds: what a seal
    killed before its commit left behind (INV-3). Returns (packs, bytes) reclaimed."""
    if store.read_only:
        return 0, 0
    referenced = {r[0] for r in store.conn.execute("SELECT DISTINCT pack FROM objects")}
    count = size = 0
    for path in _pack_files(store.packs_dir):
        if path.name in referenced or being_written(path):
            continue
        # Checked again under the writer's lock order: the writer indexes before it closes.
        if store.conn.execute(
            "SELECT 1 FROM objects WHERE pack=? LIMIT 1", (path.name,)
        ).fetchone():
            continue
        try:
            length = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        count += 1
        size += length
    if count:
        fsync_dir(store.packs_dir)
    return count, size


STALE_TEMP_SECONDS = 600


def _remove_stale_temp_files(store: Store) -> None:
    """Removes temporary siblings (INV-1) that a killed process left in the store's folders,
    e.g. an intent killed while being written; one younger than STALE_TEMP_SECONDS may still
    be about to be renamed into place by a live process, and is kept."""
    if store.read_only:
        return
    now = time.time()
    # `radar/` holds each fork family's last look (features/radar/radar.py), `coord/<family>/`
    # each family's blackboard (features/coord/board.py).
    coord = store.home / "coord"
    families = [p for p in coord.iterdir() if p.is_dir()] if coord.is_dir() else []
    for folder in (
        store.home,
        store.intents_dir,
        store.log.path.parent,
        store.home / "radar",
        *families,
    ):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if TEMP_MARK not in path.name:
                continue
            with contextlib.suppress(OSError):
                if now - path.lstat().st_mtime > STALE_TEMP_SECONDS:
                    path.unlink()


def _pack_files(directory: Path) -> list[Path]:
    """Named packs and the half-created ones a writer killed before naming them."""
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.name.endswith(".pack") or (p.name.startswith(".") and p.name.endswith(NEW_SUFFIX))
    )


def _check(store: Store, *, repair: bool, on_progress: ProgressFn | None) -> CheckReport:
    """One pass: the log and the packs, repaired first when asked, then every object and
    snapshot as they are after that. With `repair`, what the pass mended goes to `fixed` and
    `problems` keeps only what is still wrong."""
    report = CheckReport()
    found = report.fixed if repair else report.problems
    log_problem = store.log.check()
    if log_problem is not None:
        found.append(("publication.log", log_problem))
        if repair:
            with file_lock(store.locks_dir / "publish.lock", what="the store's log"):
                _kept, dropped = store.log.salvage()
            report.repaired += 1 + dropped
    damaged_packs = []
    packs = list(iter_packs(store.packs_dir))
    sizes = [_size(p) for p in packs] if on_progress is not None else []
    tally = meter(on_progress, "checking packs", len(packs), sum(sizes), unit="pack")
    for pack in packs:
        if tally is not None:
            tally.add(1, _size(pack))
        if being_written(pack):
            continue  # a seal in progress: its unsynced tail is not damage
        scan = scan_pack(pack)
        size = pack.stat().st_size
        for start, stop in scan.damaged:
            if stop == size and start > 0:
                continue  # a torn tail: an append that never completed, so never referenced
            found.append(
                (pack.name, f"bytes {start}..{stop} are not whole records (torn or damaged)")
            )
        if scan.damaged:
            damaged_packs.append((pack, scan))
    if repair:
        for pack, scan in damaged_packs:
            _repack(store, pack, scan)
            report.repaired += 1
        store.repairing = False  # the log is whole again: replay all of it
        store.rebuild_index()
        report.repaired += _republish_lost_snapshots(store)
    # Reading every object also stops serving each damaged one (Store.read, INV-4).
    bad_ids = _verify_indexed_objects(store, report, on_progress)
    if repair:
        report.repaired += len(bad_ids)
        # A damaged record read above is no longer served (INV-4): mended, unless the index
        # still points at it (its pack is missing), which is still wrong.
        mended = {oid.hex() for oid in bad_ids if store.location(oid) is None}
        report.fixed += [p for p in report.problems if p[0] in mended]
        report.problems = [p for p in report.problems if p[0] not in mended]
        report.objects -= len(mended)
    _check_snapshots(store, report, on_progress)
    return report


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _republish_lost_snapshots(store: Store) -> int:
    """Publishes again every snapshot whose record is in a pack but whose log line was lost
    (a damaged log salvaged), for workspaces still attached (store/lost.py)."""
    from tillage.store.lost import republish

    attached = {r[0] for r in store.conn.execute("SELECT id FROM workspaces WHERE forgotten=0")}
    return republish(store, attached)


def _repack(store: Store, pack: Path, scan: PackScan) -> None:
    """Copies a damaged pack's whole records, verbatim, into a new pack, then drops the old one.

    Records verify on their own (INV-3), so copying them is safe; the new pack is durable before
    the old one goes, and a crash in between leaves duplicates, which are harmless.
    """
    if scan.records:
        writer = PackWriter(store.packs_dir)
        with open(pack, "rb") as src:
            for record in scan.records:
                src.seek(record.location.offset)
                writer.append(src.read(record.location.length))
        writer.sync()
        writer.close()
    pack.unlink()
    fsync_dir(store.packs_dir)


def _verify_indexed_objects(
    store: Store, report: CheckReport, on_progress: ProgressFn | None
) -> list[bytes]:
    bad: list[bytes] = []
    rows = store.conn.execute("SELECT id FROM objects").fetchall()
    report.objects = len(rows)
    tally = meter(on_progress, "checking objects", len(rows), unit="object")
    for (object_id,) in rows:
        if tally is not None:
            tally.add()
        oid = bytes(object_id)
        try:
            store.read(oid)
        except IntegrityError as exc:
            report.problems.append((oid.hex(), exc.message))
            bad.append(oid)
    return bad


def _check_snapshots(store: Store, report: CheckReport, on_progress: ProgressFn | None) -> None:
    """Reports every published snapshot that reaches a missing or damaged object."""
    good: set[bytes] = set()
    rows = store.conn.execute("SELECT id, tree FROM snapshots ORDER BY seq").fetchall()
    tally = meter(on_progress, "checking snapshots", len(rows), unit="snapshot")
    for snap_hex, tree_hex in rows:
        if tally is not None:
            tally.add()
        missing = _first_missing(store, bytes.fromhex(snap_hex), Kind.SNAPSHOT, good)
        dropped = store.thinned_classes(snap_hex)
        if missing is None and dropped:
            # A gc dropped these classes' bytes on purpose: only the rest must be whole.
            missing = _first_missing_thinned(store, bytes.fromhex(tree_hex), dropped, good)
        elif missing is None:
            missing = _first_missing(store, bytes.fromhex(tree_hex), Kind.TREE, good)
        if missing:
            report.damaged_snapshots.append(snap_hex)
            report.problems.append((snap_hex, f"snapshot reaches a damaged object: {missing}"))


def _first_missing(store: Store, root: bytes, kind: int, good: set[bytes]) -> str | None:
    stack = [(root, kind)]
    while stack:
        oid, k = stack.pop()
        if oid in good:
            continue
        if store.location(oid) is None:
            return oid.hex()
        if k in (Kind.TREE, Kind.BLOB):  # a snapshot's tree is checked on its own
            try:
                below = codec.children(store.read(oid), k)
            except IntegrityError:
                return oid.hex()
            stack.extend(below)
        good.add(oid)
    return None


def _first_missing_thinned(
    store: Store, root: bytes, dropped: frozenset[str], good: set[bytes]
) -> str | None:
    """_first_missing for a thinned snapshot: every tree, and every file but those of the
    dropped classes (by the snapshot's own `.tillagepolicy` rules)."""
    try:
        top = codec.decode_tree(store.read(root))
    except IntegrityError:
        return root.hex()
    rules = ClassRules.EMPTY
    for e in top:
        if e.name == b".tillagepolicy" and e.content_kind is ContentKind.CHUNK:
            try:
                rules = ClassRules.of_policy(store.read(e.content))
            except IntegrityError:
                return e.content.hex()
    stack: list[tuple[str, bytes]] = [("", root)]
    while stack:
        prefix, tree = stack.pop()
        if tree in good:
            continue
        if store.location(tree) is None:
            return tree.hex()
        try:
            entries = codec.decode_tree(store.read(tree))
        except IntegrityError:
            return tree.hex()
        for e in entries:
            path = prefix + e.name.decode("utf-8", "surrogateescape")
            if e.content_kind is ContentKind.TREE and e.kind is EntryKind.DIR:
                stack.append((path + "/", e.content))
            elif e.content_kind in (ContentKind.CHUNK, ContentKind.BLOB):
                if class_of(path, rules) in dropped:
                    continue
                kind = Kind.CHUNK if e.content_kind is ContentKind.CHUNK else Kind.BLOB
                missing = _first_missing(store, e.content, kind, good)
                if missing:
                    return missing
    return None
