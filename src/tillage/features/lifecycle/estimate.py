"""Estimating a cold seal of a folder without changing anything: size, classes, dedup, time.

The folder is walked and chunked by the seal's own code (capture.Walker), with a writer that
only tallies what a seal would store, so the content IDs are exactly the ones a seal stores
and dedup against the store is exact. Nothing is written: no store is created, nothing is
attached, the store's index is read through SQLite without a journal (`immutable`) when no
process has it open, or read-only when one does (a read-only connection to a WAL database with
no `-wal`/`-shm` would create them). A SQLite database in the folder is imaged as a seal images
it, in a private temporary folder outside the folder and the store, removed at once.

`seconds` is measured, not guessed: a `till` process's start-up (this one's, when the estimate
runs in a command-line process of its own), the walk itself (stat, read, hash, cut: the seal's first
half, timed as it runs here), plus storing the new bytes at the rate measured by storing an even
sample of them as the seal's writer does (its encoder, thread pool, batches and pack buffer,
into an anonymous in-memory file), plus recording each new object in an index, timed on an
in-memory table shaped as the store's.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tillage.core.classes import CLASSES, class_of
from tillage.core.codec import Kind
from tillage.core.models import EntryKind
from tillage.core.progress import ProgressFn, relabel
from tillage.platform import clock
from tillage.platform.fs import TEMP_MARK
from tillage.store.store import ObjectWriter, Store
from tillage.workspace.attach import require_folder
from tillage.workspace.capture import Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import POLICY_FILE, Policy

# The sample of chunk bytes kept to time storing them: chunks whose ID (uniformly random) falls
# under a threshold, halved whenever the sample outgrows SAMPLE_MAX, so it stays an even
# sample of the whole folder, not of its first files.
SAMPLE_MAX = 24 << 20
COMPRESS_THREADS = 2  # store.ObjectWriter's pool
_LOOKUP_BATCH = 500


@dataclass(frozen=True)
class Estimate:
    """What a cold seal of a folder would capture and cost (see the module docstring)."""

    files: int
    dirs: int
    bytes: int
    excluded: tuple[str, ...]
    classes: dict[str, int]
    new_bytes: int
    dedup_bytes: int
    seconds: float


class _Tally(ObjectWriter):
    """A seal's writer that stores nothing: it records each distinct object a seal would put
    (chunks with their lengths) and keeps an evenly spread sample of chunk bytes."""

    def __init__(self) -> None:
        # No store: a walk with no previous index never reads back through its writer.
        self.store = None  # type: ignore[assignment]
        self.chunks: dict[bytes, int] = {}
        self.others: dict[bytes, int] = {}  # trees and chunk lists
        self.sample: dict[bytes, bytes] = {}
        self.sample_bytes = 0
        self._threshold = 1 << 16  # of the ID's first two bytes: everything, at first

    def put(self, kind: int, object_id: bytes, raw: bytes | memoryview) -> None:
        if kind != Kind.CHUNK:
            self.others.setdefault(object_id, len(raw))
            return
        if object_id in self.chunks:
            return
        self.chunks[object_id] = len(raw)
        if int.from_bytes(object_id[:2]) < self._threshold:
            self.sample[object_id] = bytes(raw)
            self.sample_bytes += len(raw)
            while self.sample_bytes > SAMPLE_MAX and self._threshold > 1:
                self._threshold //= 2
                for cid in [c for c in self.sample if int.from_bytes(c[:2]) >= self._threshold]:
                    self.sample_bytes -= len(self.sample.pop(cid))


class _Recording(Policy):
    """The folder's policy, remembering what it excluded (the walk asks once per entry and
    never looks below an excluded folder, so each path is an excluded subtree's top)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines)
        self.excluded: list[str] = []

    def excludes(self, path: str, is_dir: bool) -> bool:
        if not super().excludes(path, is_dir):
            return False
        if TEMP_MARK not in path.rpartition("/")[2]:  # tillage's own files, not the policy's
            self.excluded.append(path)
        return True


def _policy(root: Path) -> _Recording:
    try:
        data = (root / POLICY_FILE).read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return _Recording([])
    return _Recording(data.decode("utf-8", errors="surrogateescape").splitlines())


def estimate(
    folder: Path,
    home: Path,
    *,
    on_progress: ProgressFn | None = None,
    startup_seconds: float = 0.0,
) -> Estimate:
    """Walks `folder` as a cold seal would and returns what it would capture and cost, against
    the store at `home` (which need not exist); writes nothing anywhere. `startup_seconds` is
    what starting a `till` process costs here (see process_startup_seconds), added to the
    prediction because `till watch` pays it too."""
    require_folder(folder)
    root = folder.resolve()
    policy = _policy(root)
    tally = _Tally()
    home_resolved = home.resolve()
    skip = frozenset({str(home_resolved)}) if root in home_resolved.parents else frozenset()
    with tempfile.TemporaryDirectory(prefix="tillage-estimate-") as scratch:
        walker = Walker(
            root,
            policy,
            PathIndex(),
            tally,
            Path(scratch),
            clock.files_now_ns(),
            keep_manifest=True,
            skip_dirs=skip,
            on_progress=relabel(on_progress, "scanning"),  # it seals nothing
        )
        started = time.perf_counter()
        capture = walker.run()
        walk_seconds = time.perf_counter() - started
    manifest = capture.manifest or {}
    classes = dict.fromkeys(CLASSES, 0)
    rules = policy.classes
    dirs = 0
    for path, entry in manifest.items():
        if entry.kind is EntryKind.FILE:
            classes[class_of(path, rules)] += entry.size
        elif entry.kind is EntryKind.DIR:
            dirs += 1
    stored = _stored(home, [*tally.chunks, *tally.others])
    new_chunks = {cid: n for cid, n in tally.chunks.items() if cid not in stored}
    new_bytes = sum(new_chunks.values())
    new_objects = len(new_chunks) + sum(1 for oid in tally.others if oid not in stored)
    seconds = (
        startup_seconds
        + walk_seconds
        + _store_seconds(tally.sample, new_chunks, new_bytes)
        + _index_seconds(new_objects)
    )
    return Estimate(
        files=capture.files,
        dirs=dirs,
        bytes=capture.total_bytes,
        excluded=tuple(sorted(policy.excluded)),
        classes=classes,
        new_bytes=new_bytes,
        dedup_bytes=capture.total_bytes - new_bytes,
        seconds=round(seconds, 3),
    )


def process_startup_seconds() -> float:
    """How long this process has run (its start-up, when asked first thing by a command-line
    process); 0.0 where /proc cannot tell."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(uptime - started, 0.0)


def _stored(home: Path, ids: list[bytes]) -> set[bytes]:
    """The IDs among `ids` the store at `home` already holds (none when there is no store),
    read without writing a byte (see the module docstring)."""
    index = home / "index.sqlite"
    if not Store.exists(home) or not index.is_file():
        return set()
    in_use = os.path.exists(f"{index}-wal") and os.path.exists(f"{index}-shm")
    uri = index.resolve().as_uri() + ("?mode=ro" if in_use else "?immutable=1")
    found: set[bytes] = set()
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error:
        return found
    try:
        for start in range(0, len(ids), _LOOKUP_BATCH):
            batch = ids[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(batch))
            rows = conn.execute(f"SELECT id FROM objects WHERE id IN ({marks})", batch)
            found.update(bytes(row[0]) for row in rows)
    except sqlite3.Error:
        return set()  # an index being rebuilt under us: count everything as new
    finally:
        conn.close()
    return found


def _store_seconds(sample: dict[bytes, bytes], new: dict[bytes, int], new_bytes: int) -> float:
    """Time a seal spends storing `new_bytes`, at the rate measured by storing the sampled new
    chunks (all sampled chunks when none of the new ones was sampled) the way store.ObjectWriter
    does: batches compressed by the seal's record encoder on its thread pool, appended in order
    and written out in 8 MiB pieces, into an anonymous in-memory file (nothing on disk)."""
    if not new_bytes or not sample:
        return 0.0
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    from tillage.store.packs import WRITE_BUFFER, encode_record

    chosen = [(cid, data) for cid, data in sample.items() if cid in new] or list(sample.items())
    total = sum(len(data) for _cid, data in chosen)
    encode_record(int(Kind.CHUNK), chosen[0][0], chosen[0][1])  # its first call sets zstd up

    def encode(batch: list[tuple[bytes, bytes]]) -> list[bytes]:
        return [encode_record(int(Kind.CHUNK), cid, data) for cid, data in batch]

    memfd = getattr(os, "memfd_create", None)
    fd = memfd("tillage-estimate") if memfd is not None else -1
    pending: list[bytes] = []
    pending_bytes = 0
    inflight: deque[Future[list[bytes]]] = deque()

    def drain(n: int | None = None) -> None:
        nonlocal pending_bytes
        while inflight and (n is None or n > 0):
            for record in inflight.popleft().result():
                pending.append(record)
                pending_bytes += len(record)
                if pending_bytes >= WRITE_BUFFER:  # as a PackWriter writes its buffer
                    if fd >= 0:
                        os.write(fd, b"".join(pending))
                    pending.clear()
                    pending_bytes = 0
            if n is not None:
                n -= 1

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=COMPRESS_THREADS) as pool:
            batch: list[tuple[bytes, bytes]] = []
            batch_bytes = 0
            for cid, data in chosen:
                batch.append((cid, bytes(data)))  # a seal's put copies each chunk once
                batch_bytes += len(data)
                if (
                    batch_bytes >= ObjectWriter.BATCH_BYTES
                    or len(batch) >= ObjectWriter.BATCH_COUNT
                ):
                    inflight.append(pool.submit(encode, batch))
                    batch, batch_bytes = [], 0
                    if len(inflight) > ObjectWriter.WINDOW:
                        drain(1)
            if batch:
                inflight.append(pool.submit(encode, batch))
            drain()
            if pending and fd >= 0:
                os.write(fd, b"".join(pending))
        spent = time.perf_counter() - started
    finally:
        if fd >= 0:
            os.close(fd)
    return spent / total * new_bytes


def _index_seconds(objects: int) -> float:
    """Time to record `objects` new objects in the index, timed on an in-memory table shaped
    as the store's (a seal inserts each new object's location once)."""
    if not objects:
        return 0.0
    sample = min(objects, 20_000)
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(
            "CREATE TABLE objects(id BLOB PRIMARY KEY, kind INTEGER, pack TEXT, offset INTEGER,"
            " length INTEGER, raw_length INTEGER) WITHOUT ROWID"
        )
        rows: Iterable[tuple[bytes, int, str, int, int, int]] = (
            (os.urandom(32), 1, "pack", i, 100, 100) for i in range(sample)
        )
        started = time.perf_counter()
        with conn:
            conn.executemany("INSERT OR IGNORE INTO objects VALUES (?,?,?,?,?,?)", rows)
        spent = time.perf_counter() - started
    finally:
        conn.close()
    return spent / sample * objects
