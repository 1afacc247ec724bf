"""The store: one per user, shared by every workspace. Objects in packs, facts in the log.

Opening a store catches the advisory index up with the publication log (and rebuilds the index
from packs and log when it is missing). Writers each own their own pack; publication is
serialised by one lock (INV-5).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import weakref
from pathlib import Path

from tillage.errors import IntegrityError
from tillage.platform import clock, failpoints
from tillage.platform.errors import DiskFullError
from tillage.platform.fs import atomic_write
from tillage.platform.locks import SHARED_WAIT, file_lock, maintenance_lock
from tillage.store import index as ix
from tillage.store.errors import ControlFileDamagedError, StoreDamagedError, StoreReadOnlyError
from tillage.store.marker import MARKER, check_format, marker_bytes
from tillage.store.packs import (
    Location,
    PackReader,
    iter_packs,
    scan_pack,
)
from tillage.store.publog import GENESIS, LogRecord, PublicationLog
from tillage.store.replay import apply_record
from tillage.store.rows import (
    COMMIT_COLS,
    SESSION_COLS,
    SNAP_COLS,
    ClaimRow,
    ForkRow,
    SessionCommitRow,
    SessionRow,
    SnapshotRow,
    SyncRefRow,
    WorkspaceRow,
    commit_row,
    snapshot_row,
)
from tillage.store.writer import PackingWriter

# The command line opens a store on most calls: what only the type checker or a seal's
# compression pool needs is not imported at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from typing import Any


_OPEN: weakref.WeakSet[Store] = weakref.WeakSet()


def close_stores_opened_by(thread_id: int) -> None:
    """Closes every store the thread `thread_id` opened and left open (a served call ends)."""
    for store in list(_OPEN):
        if store.opened_by == thread_id:
            store.close()


@contextlib.contextmanager
def closing_stores_opened_here() -> Iterator[None]:
    """Closes, as the block ends, every store this thread opened inside it and left open (a
    call served for someone else is done); the stores it had open before stay open."""
    thread_id = threading.get_ident()
    before = set(_OPEN)
    try:
        yield
    finally:
        for store in list(_OPEN):
            if store.opened_by == thread_id and store not in before:
                store.close()


class Store:
    """A store at `home` ($TILLAGE_HOME)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.packs_dir = home / "packs"
        self.log = PublicationLog(home / "log" / "publication.log")
        self.locks_dir = home / "locks"
        self.intents_dir = home / "intents"
        self.tmp_dir = home / "tmp"
        self.index_path = home / "index.sqlite"
        self._reader = PackReader(self.packs_dir)
        self._conn: sqlite3.Connection | None = None
        self.repairing = False
        self.read_only = False
        self.disk_full = False  # read-only because its disk is full: a write answers disk_full
        self._packs_epoch: str | None = None
        self.log_problem: str | None = None
        self.marker_problem: str | None = None
        # Which thread opened it: a long-lived process closes what one call opened (an
        # SQLite connection sits in a reference cycle and would stay open until a gc pass,
        # holding the index's WAL and file descriptors).
        self.opened_by = threading.get_ident()
        _OPEN.add(self)

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def open(cls, home: Path, *, repairing: bool = False) -> Store:
        """Opens (creating when new) the store at `home` and brings its index up to date.

        `repairing` opens a store whose log is damaged, with the facts before the damage, for
        `verify` to report and repair; otherwise a damaged log is a public integrity error.
        """
        store = cls(home)
        store.repairing = repairing
        try:
            store._ensure_layout()
            store._open_index()
        except (OSError, sqlite3.OperationalError, DiskFullError) as exc:
            full = isinstance(exc, DiskFullError)
            if not (full or ix.is_read_only_failure(exc)) or not cls.exists(home):
                raise
            # A read-only store (permissions, a read-only mount), or one on a full disk (where
            # SQLite cannot make the WAL side files even to read), answers every reading
            # command: its index is read into memory and caught up there.
            store.close()
            store = cls(home)
            store.repairing, store.read_only, store.disk_full = repairing, True, full
            store._ensure_layout()
            store._open_index_read_only()
        return store

    @classmethod
    def exists(cls, home: Path) -> bool:
        """Tells whether `home` holds a store (its marker, whole or damaged, is there)."""
        return os.path.lexists(home / MARKER)

    def _ensure_layout(self) -> None:
        marker = self.home / MARKER
        if os.path.lexists(marker):
            try:
                check_format(self.home)
            except ControlFileDamagedError as exc:
                if not self.repairing:
                    raise
                self.marker_problem = exc.message  # verify reports it; --repair writes it again
            return
        for d in (
            self.home,
            self.packs_dir,
            self.log.path.parent,
            self.locks_dir,
            self.intents_dir,
            self.tmp_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        atomic_write(marker, marker_bytes())

    def _adopt(self, conn: sqlite3.Connection) -> None:
        """Makes `conn` the index connection, closed with the store or when the store is
        collected: a connection sits in a cycle with its statement cache, so without this a
        store dropped unclosed held the index (and its WAL) open until a gc pass."""
        self._conn = conn
        weakref.finalize(self, conn.close)

    def _open_index(self) -> None:
        if ix.misplaced(self.index_path):  # a folder in an index file's place (SQLite would
            ix.set_aside(self.index_path)  # open it read-only, or not at all): INV-4
        missing = not self.index_path.exists()
        try:
            self._adopt(ix.connect(self.index_path))
            schema = ix.get_meta(self.conn, "schema")
        except sqlite3.OperationalError:
            raise  # a full disk or a lock, not damage: keep the index (public_errors told why)
        except sqlite3.DatabaseError:
            self._set_index_aside()
            missing, schema = True, None
        if missing or schema != str(ix.SCHEMA_VERSION):
            self.rebuild_index()
        else:
            self.catch_up()

    def _set_index_aside(self) -> None:
        """INV-4: the index is a cache; a damaged one is set aside and made anew (then rebuilt)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        ix.set_aside(self.index_path)
        self._adopt(ix.connect(self.index_path))

    def _open_index_read_only(self) -> None:
        """Loads the index into memory from a store this process may not write (INV-4: the
        index is derived, so an in-memory copy caught up with the log answers the same)."""
        memory, schema = ix.memory_copy(self.index_path)
        self._adopt(memory)
        if schema != str(ix.SCHEMA_VERSION):
            self.rebuild_index()
        else:
            self.catch_up()

    def require_writable(self) -> None:
        """Raises store.read_only (disk_full on a full disk) when this process cannot write."""
        if self.disk_full:
            raise DiskFullError(f"no space left on the disk holding the store {self.home}")
        if self.read_only:
            raise StoreReadOnlyError.at(self.home)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    def close(self) -> None:
        _OPEN.discard(self)
        self._reader.close()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the index follows the log ---------------------------------------------------------

    def _log_position(self) -> tuple[int, str, int]:
        offset = int(ix.get_meta(self.conn, "log_offset") or 0)
        last = ix.get_meta(self.conn, "log_hash") or GENESIS
        seq = int(ix.get_meta(self.conn, "log_seq") or 0)
        return seq, last, offset

    def catch_up(self) -> None:
        """Applies log records the index has not seen yet; closes the pack files a gc has
        replaced since this store last looked (an open descriptor keeps a deleted pack's
        bytes on disk)."""
        epoch = ix.get_meta(self.conn, "packs_epoch")
        if epoch != self._packs_epoch:
            if self._packs_epoch is not None:
                self._reader.close()
            self._packs_epoch = epoch
        _seq, last, offset = self._log_position()
        size = self.log.path.stat().st_size if self.log.path.exists() else 0
        if size < offset:
            # The log lost lines the index had applied (INV-6): the index must forget them too.
            self.rebuild_index()
            return
        if size == offset:
            return
        with ix.write_txn(self.conn):
            _seq, last, offset = self._log_position()
            self._replay(offset, last)

    def _replay(self, offset: int, last: str) -> None:
        """Applies the log's records after `offset`; a damaged record stops the replay there."""
        try:
            for record in self.log.read_from(offset, last):
                apply_record(self.conn, record)
        except IntegrityError as exc:
            if not self.repairing:
                raise StoreDamagedError(
                    f"the store's publication log is damaged: {exc.message}",
                    next_step="run `till verify --repair` to salvage the log",
                ) from exc
            self.log_problem = exc.message

    def rebuild_index(self) -> int:
        """Rebuilds the index from the packs and the log; returns the objects found (INV-4)."""
        count = 0
        with ix.write_txn(self.conn):
            schema = ix.get_meta(self.conn, "schema")
            if schema is not None and schema != str(ix.SCHEMA_VERSION):
                # Built by another version (its tables may lack a column): made anew. An index
                # with no schema yet is one a concurrent first open is building: only emptied.
                ix.reset_schema(self.conn)
            for table in ix.TABLES:
                self.conn.execute(f"DELETE FROM {table}")
            for pack in iter_packs(self.packs_dir):
                records = scan_pack(pack).records
                ix.insert_objects(
                    self.conn,
                    (
                        (
                            r.id,
                            r.kind,
                            r.location.pack,
                            r.location.offset,
                            r.location.length,
                            r.raw_len,
                        )
                        for r in records
                    ),
                )
                count += len(records)
            self._replay(0, GENESIS)
            ix.set_meta(self.conn, "schema", str(ix.SCHEMA_VERSION))
        return count

    def last_seq(self) -> int:
        """The seq of the log's last record (0 for an empty log), after catching up with it."""
        self.catch_up()
        return self._log_position()[0]

    # -- publication -----------------------------------------------------------------------

    def publish(self, kind: str, body: dict[str, Any]) -> LogRecord:
        """Appends a fact to the log durably, then to the index. Holds the publish lock."""
        self.require_writable()
        with file_lock(self.locks_dir / "publish.lock", what="the store's log"):
            self.catch_up()
            record = self.log.append(kind, body, clock.now_ns(), tail=self._log_position())
            failpoints.hit("publish.after_log")
            with ix.write_txn(self.conn):
                # Another process's catch_up may have applied it already (it reads the log
                # without the publish lock): a record is applied once.
                if self._log_position()[0] < record.seq:
                    apply_record(self.conn, record)
            return record

    # -- objects ---------------------------------------------------------------------------

    def location(self, object_id: bytes) -> Location | None:
        row = self.conn.execute(
            "SELECT pack, offset, length FROM objects WHERE id=?", (object_id,)
        ).fetchone()
        return None if row is None else Location(row[0], row[1], row[2])

    def read(self, object_id: bytes) -> bytes:
        """Returns an object's bytes, verified against its ID; integrity error otherwise."""
        loc = self.location(object_id)
        if loc is None:
            raise StoreDamagedError(f"object {object_id.hex()[:12]} is missing from the store")
        try:
            _kind, raw = self._reader.read(loc, object_id)
        except IntegrityError:
            moved = self.location(object_id)
            if moved is not None and moved != loc:
                # A gc (or a repair) rewrote its pack since it was looked up: read it there.
                return self._reader.read(moved, object_id)[1]
            # A missing pack may have just been rewritten by a repair: only a record that is
            # there and wrong is forgotten.
            if (self.packs_dir / loc.pack).exists():
                self.forget_damaged(object_id)
            raise
        return raw

    def read_record(self, object_id: bytes) -> bytes:
        """Returns an object's whole pack record (kind, ID, stored payload, CRC) as it lies in
        its pack, after proving it (what sync seals and sends: the receiver proves it again)."""
        from tillage.store.packs import decode_record

        loc = self.location(object_id)
        if loc is None:
            raise StoreDamagedError(f"object {object_id.hex()[:12]} is missing from the store")
        data = self._reader.read_raw(loc)
        decode_record(data, object_id)
        return data

    def forget_damaged(self, object_id: bytes) -> None:
        """Stops serving a damaged record (INV-4): the object now reads as missing, and the
        next seal that holds its bytes writes them again, which heals every snapshot using it."""
        self.conn.execute("DELETE FROM objects WHERE id=?", (object_id,))

    def intact(self, object_id: bytes, loc: Location) -> bool:
        """Tells whether the record of `object_id` at `loc` is whole and passes its checksum
        (no decompression); one that is not is no longer served (INV-4: forget_damaged)."""
        if self._reader.intact(loc):
            return True
        self.forget_damaged(object_id)
        return False

    def locations(self, ids: list[bytes]) -> dict[bytes, Location]:
        """Returns where each of `ids` the index knows lives (one query per 500 IDs)."""
        found: dict[bytes, Location] = {}
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            rows = self.conn.execute(
                f"SELECT id, pack, offset, length FROM objects WHERE id IN ({marks})", batch
            )
            found.update((bytes(r[0]), Location(r[1], r[2], r[3])) for r in rows)
        return found

    def writer(self) -> ObjectWriter:
        self.require_writable()
        return ObjectWriter(self)

    # -- queries ---------------------------------------------------------------------------

    def workspace_by_root(self, root: str) -> WorkspaceRow | None:
        row = self.conn.execute(
            "SELECT id, root, attached_at FROM workspaces WHERE root=? AND forgotten=0 "
            "ORDER BY attached_at DESC LIMIT 1",
            (root,),
        ).fetchone()
        return None if row is None else WorkspaceRow(*row)

    def forgotten_workspace_by_root(self, root: str) -> WorkspaceRow | None:
        """The newest workspace at `root` that `till forget` detached without purging: its
        timeline is still in the store, for a later attach to pick up again."""
        row = self.conn.execute(
            "SELECT id, root, attached_at FROM workspaces WHERE root=? AND forgotten=1 "
            "ORDER BY attached_at DESC LIMIT 1",
            (root,),
        ).fetchone()
        return None if row is None else WorkspaceRow(*row)

    def ever_attached(self, workspace_id: str) -> bool:
        """Tells whether the log records the workspace at all (forgotten since, or not)."""
        sql = "SELECT 1 FROM workspaces WHERE id=?"
        return self.conn.execute(sql, (workspace_id,)).fetchone() is not None

    def workspace(self, workspace_id: str) -> WorkspaceRow | None:
        row = self.conn.execute(
            "SELECT id, root, attached_at FROM workspaces WHERE id=? AND forgotten=0",
            (workspace_id,),
        ).fetchone()
        return None if row is None else WorkspaceRow(*row)

    def snapshots(
        self,
        workspace_id: str,
        limit: int | None = None,
        trigger: str | None = None,
        session: str | None = None,
        before_ns: int | None = None,
        after: SnapshotRow | None = None,
    ) -> list[SnapshotRow]:
        """A workspace's snapshots, newest first (sealed at or before `before_ns`; older than
        `after`, a previous page's last row: a keyset cursor, every page costs the same)."""
        sql = f"SELECT {SNAP_COLS} FROM snapshots WHERE workspace=?"
        args: list[Any] = [workspace_id]
        if before_ns is not None:
            sql += " AND sealed_at_ns <= ?"
            args.append(before_ns)
        if after is not None:
            sql += " AND (sealed_at_ns < ? OR (sealed_at_ns = ? AND seq < ?))"
            args.extend((after.sealed_at_ns, after.sealed_at_ns, after.seq))
        if trigger:
            sql += " AND trigger=?"
            args.append(trigger)
        if session:
            sql += " AND session=?"
            args.append(session)
        sql += " ORDER BY sealed_at_ns DESC, seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [snapshot_row(r) for r in self.conn.execute(sql, args)]

    def snapshot_count(self, workspace_id: str) -> int:
        sql = "SELECT COUNT(*) FROM snapshots WHERE workspace=?"
        return int(self.conn.execute(sql, (workspace_id,)).fetchone()[0])

    def head(self, workspace_id: str) -> SnapshotRow | None:
        rows = self.snapshots(workspace_id, limit=1)
        return rows[0] if rows else None

    def snapshot(self, snapshot_id: str) -> SnapshotRow | None:
        row = self.conn.execute(
            f"SELECT {SNAP_COLS} FROM snapshots WHERE id=?", (snapshot_id,)
        ).fetchone()
        return None if row is None else snapshot_row(row)

    def snapshots_with_prefix(self, workspace_id: str, prefix: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT id FROM snapshots WHERE workspace=? AND id >= ? AND id < ? LIMIT 2",
            (workspace_id, prefix, prefix + "g"),
        )
        return [r[0] for r in rows]

    def snapshots_with_prefix_in(self, workspace_ids: list[str], prefix: str) -> list[str]:
        """Like snapshots_with_prefix, over several timelines (a workspace and its forks)."""
        marks = ",".join("?" * len(workspace_ids))
        rows = self.conn.execute(
            f"SELECT id FROM snapshots WHERE workspace IN ({marks}) AND id >= ? AND id < ? LIMIT 2",
            (*workspace_ids, prefix, prefix + "g"),
        )
        return [r[0] for r in rows]

    # -- forks and claims ------------------------------------------------------------------

    _FORK_COLS = "workspace, parent, name, base, root, created_ns, removed_ns, last, port, identity"

    def fork_of(self, workspace_id: str) -> ForkRow | None:
        """The fork record of a workspace that is a fork (removed or not); None otherwise."""
        row = self.conn.execute(
            f"SELECT {self._FORK_COLS} FROM forks WHERE workspace=?", (workspace_id,)
        ).fetchone()
        return None if row is None else ForkRow(*row)

    def forks_of(self, parent_id: str, *, removed: bool = False) -> list[ForkRow]:
        """A workspace's forks, oldest first: live ones, or with `removed` every one."""
        sql = f"SELECT {self._FORK_COLS} FROM forks WHERE parent=?"
        if not removed:
            sql += " AND removed_ns IS NULL"
        return [ForkRow(*r) for r in self.conn.execute(sql + " ORDER BY created_ns", (parent_id,))]

    def fork_named(self, parent_id: str, name: str) -> ForkRow | None:
        """The live fork of `parent_id` called `name`."""
        row = self.conn.execute(
            f"SELECT {self._FORK_COLS} FROM forks WHERE parent=? AND name=? AND removed_ns IS NULL",
            (parent_id, name),
        ).fetchone()
        return None if row is None else ForkRow(*row)

    def fork_pending(self, workspace_id: str) -> list[tuple[str, str, str]]:
        """What a merge into the fork left to settle: (path, conflict kind, how it settles:
        "markers" once no conflict markers are left, "take" by `merge --take`)."""
        rows = self.conn.execute(
            "SELECT path, kind, how FROM fork_pending WHERE workspace=? ORDER BY path",
            (workspace_id,),
        )
        return [(str(p), str(k), str(h)) for p, k, h in rows]

    def claims(self, family: str, *, retired: bool = False) -> list[ClaimRow]:
        """Every claim recorded for a family, expired ones included (the caller has the clock),
        with the folder of the workspace that took it. A claim taken in a fork since removed
        is left out unless `retired`: fork-rm releases them, and one whose release never came
        (a removal killed in between, an earlier build's) must not outlive its fork."""
        gone = (
            ""
            if retired
            else (
                " AND NOT EXISTS (SELECT 1 FROM forks f WHERE f.workspace = c.workspace"
                " AND f.removed_ns IS NOT NULL)"
            )
        )
        rows = self.conn.execute(
            "SELECT c.id, c.family, c.pattern, c.owner, c.expires_ns, c.claimed_ns, c.workspace,"
            " w.root FROM claims c LEFT JOIN workspaces w ON w.id = c.workspace "
            f"WHERE c.family=?{gone} ORDER BY c.claimed_ns, c.id",
            (family,),
        )
        return [ClaimRow(*r) for r in rows]

    # -- agent sessions --------------------------------------------------------------------

    def session_commits(self, workspace_id: str, session: str) -> list[SessionCommitRow]:
        """A session's commits, oldest first (an unknown session has none)."""
        rows = self.conn.execute(
            f"SELECT {COMMIT_COLS} FROM session_commits WHERE workspace=? AND session=? "
            "ORDER BY seq",
            (workspace_id, session),
        )
        return [commit_row(r) for r in rows]

    def session_head(self, workspace_id: str, session: str) -> SessionCommitRow | None:
        """A session's newest commit, or None when it has none."""
        row = self.conn.execute(
            f"SELECT {COMMIT_COLS} FROM session_commits WHERE workspace=? AND session=? "
            "ORDER BY seq DESC LIMIT 1",
            (workspace_id, session),
        ).fetchone()
        return None if row is None else commit_row(row)

    def session_first(self, workspace_id: str, session: str) -> SessionCommitRow | None:
        """A session's first commit (its baseline), or None when it has none."""
        row = self.conn.execute(
            f"SELECT {COMMIT_COLS} FROM session_commits WHERE workspace=? AND session=? "
            "ORDER BY seq LIMIT 1",
            (workspace_id, session),
        ).fetchone()
        return None if row is None else commit_row(row)

    def session_commit(self, commit_id: str) -> SessionCommitRow | None:
        row = self.conn.execute(
            f"SELECT {COMMIT_COLS} FROM session_commits WHERE id=?", (commit_id,)
        ).fetchone()
        return None if row is None else commit_row(row)

    def session_commits_with_prefix(self, workspace_id: str, prefix: str) -> list[str]:
        """Up to two commit IDs of the workspace's sessions that start with `prefix`."""
        rows = self.conn.execute(
            "SELECT id FROM session_commits WHERE workspace=? AND id >= ? AND id < ? LIMIT 2",
            (workspace_id, prefix, prefix + "g"),
        )
        return [r[0] for r in rows]

    def sessions(self, workspace_id: str) -> list[SessionRow]:
        """A workspace's sessions, most recently updated first."""
        rows = self.conn.execute(
            f"SELECT {SESSION_COLS} FROM sessions WHERE workspace=? ORDER BY updated_ns DESC, id",
            (workspace_id,),
        )
        return [SessionRow(*r) for r in rows]

    def session(self, workspace_id: str, session: str) -> SessionRow | None:
        row = self.conn.execute(
            f"SELECT {SESSION_COLS} FROM sessions WHERE workspace=? AND id=?",
            (workspace_id, session),
        ).fetchone()
        return None if row is None else SessionRow(*row)

    def settings(self) -> dict[str, Any]:
        """The store's settings facts (`retention`, `budget`), the latest of each."""
        loaded: dict[str, Any] = json.loads(ix.get_meta(self.conn, "settings") or "{}")
        return loaded

    def thinned_classes(self, snapshot_id: str) -> frozenset[str]:
        """The content classes whose bytes a gc dropped from a snapshot (empty: none)."""
        row = self.conn.execute(
            "SELECT classes FROM thinned WHERE snapshot=?", (snapshot_id,)
        ).fetchone()
        return frozenset(json.loads(row[0])) if row else frozenset()

    def sync_ref(self, workspace_id: str, remote: str, ref: str) -> SyncRefRow | None:
        """What this workspace last synced with `remote`'s `ref` (None: never)."""
        row = self.conn.execute(
            "SELECT workspace, remote, ref, snapshot, local, synced_ns FROM sync_refs "
            "WHERE workspace=? AND remote=? AND ref=?",
            (workspace_id, remote, ref),
        ).fetchone()
        return None if row is None else SyncRefRow(*row)

    def was_dropped(self, snapshot_id: str) -> bool:
        """Tells whether a gc removed this snapshot (it answers not_found now)."""
        return (
            self.conn.execute("SELECT 1 FROM dropped WHERE snapshot=?", (snapshot_id,)).fetchone()
            is not None
        )

    # -- maintenance -----------------------------------------------------------------------

    def sharing(self, *, timeout: float = SHARED_WAIT) -> AbstractContextManager[None]:
        """Held by every operation that reads objects it looked up, or writes objects and
        publishes what reaches them (a seal, a rewind): a gc waits for them, and they for a
        gc (INV-14), so a gc never removes bytes a seal just deduplicated against, and never
        deletes a pack a rewind reads."""
        return maintenance_lock(self.locks_dir, exclusive=False, timeout=timeout)

    def maintaining(self, *, timeout: float = SHARED_WAIT) -> AbstractContextManager[None]:
        """The exclusive side of the maintenance lock, held by a gc for its whole run."""
        return maintenance_lock(self.locks_dir, exclusive=True, timeout=timeout)

    def settle_index(self) -> None:
        """Folds the index's write-ahead log back into it and truncates it (best effort, a
        second at most): a gc that wrote many rows measures the store as it will stay."""
        conn = self.conn
        try:
            conn.execute("PRAGMA busy_timeout=1000")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass  # a reader in the way: the log is folded in later, by whoever closes last
        finally:
            conn.execute("PRAGMA busy_timeout=30000")

    def bytes_on_disk(self) -> int:
        """The store's size without walking it: every indexed record's bytes plus the log and
        the index files (half-written packs of killed seals are not counted until reclaimed)."""
        row = self.conn.execute("SELECT COALESCE(SUM(length), 0) FROM objects").fetchone()
        total = int(row[0])
        for path in (self.log.path, self.index_path, Path(f"{self.index_path}-wal")):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total


class ObjectWriter(PackingWriter):
    """A seal's writer (store/writer.py) over this store, which a seal also reads through."""

    store: Store

    def __init__(self, store: Store) -> None:
        super().__init__(store)
