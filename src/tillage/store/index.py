"""The advisory SQLite index: where objects live, and the log's facts in queryable form.

Everything here can be rebuilt from the packs and the publication log (INV-4), so deleting the
file loses nothing; it only makes the next command slower.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tillage.errors import BusyError
from tillage.platform.errors import DiskFullError

SCHEMA_VERSION = 9

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
    id BLOB PRIMARY KEY, kind INT NOT NULL, pack TEXT NOT NULL,
    offset INT NOT NULL, length INT NOT NULL, raw_len INT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workspaces(
    id TEXT PRIMARY KEY, root TEXT NOT NULL, attached_at INT NOT NULL,
    forgotten INT NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS workspaces_root ON workspaces(root);
CREATE TABLE IF NOT EXISTS snapshots(
    id TEXT PRIMARY KEY, workspace TEXT NOT NULL, seq INT NOT NULL, sealed_at_ns INT NOT NULL,
    trigger TEXT NOT NULL, label TEXT, parent TEXT, tree TEXT NOT NULL, files INT NOT NULL,
    bytes INT NOT NULL, grade TEXT NOT NULL, agent TEXT, turn TEXT, session TEXT,
    merged_from TEXT);
CREATE INDEX IF NOT EXISTS snapshots_ws ON snapshots(workspace, seq);
CREATE TABLE IF NOT EXISTS pins(snapshot TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS pathindex(workspace TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pathshards(
    workspace TEXT NOT NULL, shard INT NOT NULL, data BLOB NOT NULL, PRIMARY KEY(workspace, shard));
CREATE TABLE IF NOT EXISTS forks(
    workspace TEXT PRIMARY KEY, parent TEXT NOT NULL, name TEXT NOT NULL, base TEXT NOT NULL,
    root TEXT NOT NULL, created_ns INT NOT NULL, removed_ns INT, last TEXT, port INT,
    identity TEXT);
CREATE INDEX IF NOT EXISTS forks_parent ON forks(parent, name);
CREATE TABLE IF NOT EXISTS fork_pending(
    workspace TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, how TEXT NOT NULL,
    PRIMARY KEY(workspace, path)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims(
    id TEXT PRIMARY KEY, family TEXT NOT NULL, pattern TEXT NOT NULL, owner TEXT NOT NULL,
    expires_ns INT, claimed_ns INT NOT NULL, workspace TEXT);
CREATE INDEX IF NOT EXISTS claims_family ON claims(family);
CREATE TABLE IF NOT EXISTS session_commits(
    id TEXT PRIMARY KEY, workspace TEXT NOT NULL, session TEXT NOT NULL, seq INT NOT NULL,
    parent TEXT, snapshot TEXT NOT NULL, description TEXT NOT NULL, created_ns INT NOT NULL,
    file_count INT NOT NULL, total_size INT NOT NULL, changed_files INT NOT NULL,
    changed_total_size INT NOT NULL, baseline INT NOT NULL, agent TEXT);
CREATE INDEX IF NOT EXISTS session_commits_chain ON session_commits(workspace, session, seq);
CREATE TABLE IF NOT EXISTS dropped(snapshot TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS thinned(snapshot TEXT PRIMARY KEY, classes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sync_refs(
    workspace TEXT NOT NULL, remote TEXT NOT NULL, ref TEXT NOT NULL, snapshot TEXT NOT NULL,
    local TEXT NOT NULL, synced_ns INT NOT NULL, PRIMARY KEY(workspace, remote, ref));
CREATE TABLE IF NOT EXISTS sessions(
    workspace TEXT NOT NULL, id TEXT NOT NULL, created_ns INT NOT NULL, updated_ns INT NOT NULL,
    commits INT NOT NULL, head TEXT NOT NULL, ended_ns INT, PRIMARY KEY(workspace, id));
CREATE TABLE IF NOT EXISTS operations(
    id TEXT PRIMARY KEY, workspace TEXT, seq INT NOT NULL, at_ns INT NOT NULL,
    verb TEXT NOT NULL, undoes TEXT, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS operations_ws ON operations(workspace, seq);
"""


SQLITE_BUSY = 5
SQLITE_IOERR = 10
SQLITE_FULL = 13


@contextmanager
def public_errors(path: Path | str) -> Iterator[None]:
    """Turns SQLite's full-disk and lock time-out failures into the public errors they are."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == SQLITE_FULL or (code == SQLITE_IOERR and _disk_full(path)):
            raise DiskFullError(f"no space left for the store's index ({exc})") from exc
        if code == SQLITE_BUSY:
            raise BusyError("another tillage process holds the store's index") from exc
        raise


def misplaced(path: Path) -> bool:
    """Tells whether something other than a file (a folder) holds one of the index's paths."""
    paths = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]
    return any(p.exists() and not p.is_file() for p in paths)


def set_aside(path: Path) -> None:
    """Moves the index at `path` (and its WAL files) out of the way as `.damaged`, replacing
    an earlier damaged copy; a folder in a file's place goes to a free name (control.set_aside)."""
    from tillage.store import control

    for suffix in ("", "-wal", "-shm"):
        here, aside = Path(f"{path}{suffix}"), Path(f"{path}{suffix}.damaged")
        if here.is_dir() or aside.is_dir():
            control.set_aside(here)
        elif here.exists():
            os.replace(here, aside)


def memory_copy(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """An in-memory copy of the index at `path` (read, never written: a store this process may
    not write) and its schema version; an empty one when there is none or it does not read."""
    memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    schema: str | None = None
    if path.is_file():
        try:
            source = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
            try:
                source.backup(memory)
            finally:
                source.close()
            schema = get_meta(memory, "schema")
        except sqlite3.DatabaseError:
            memory.close()
            memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    memory.executescript(SCHEMA)
    return memory, schema


def is_read_only_failure(exc: BaseException) -> bool:
    """Tells whether opening the store failed because this process cannot write it."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _disk_full(path: Path | str) -> bool:
    try:
        st = os.statvfs(os.path.dirname(os.fspath(path)) or ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def connect(path: Path) -> sqlite3.Connection:
    """Opens the index with the settings every process shares (WAL, explicit transactions)."""
    with public_errors(path):
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        # Before any table exists: a new index gives freed pages back (the path index blob is
        # rewritten by every seal). Only then: on an existing index the pragma writes a page,
        # and a read-only call (`till status`) must write nothing.
        if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
            conn.execute("PRAGMA auto_vacuum=FULL")
        conn.executescript(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;"
            "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-32768;"
        )
        conn.executescript(SCHEMA)
    return conn


TABLES = (
    "objects",
    "workspaces",
    "snapshots",
    "pins",
    "meta",
    "pathindex",
    "pathshards",
    "forks",
    "fork_pending",
    "claims",
    "session_commits",
    "sessions",
    "dropped",
    "thinned",
    "sync_refs",
    "operations",
)


def reset_schema(conn: sqlite3.Connection) -> None:
    """Drops every table and makes them anew, inside the caller's write transaction: an index
    of an older schema may lack a column, and since it is only a cache (INV-4) it is rebuilt
    rather than migrated."""
    for table in TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


@contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """An immediate write transaction (avoids deferred-upgrade deadlocks between processes)."""
    path = _path_of(conn)
    with public_errors(path):
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise


def _path_of(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "."


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


ObjectRow = tuple[bytes, int, str, int, int, int]  # id, kind, pack, offset, length, raw_len


def insert_objects(conn: sqlite3.Connection, rows: Iterable[ObjectRow]) -> None:
    """Records where objects live; a known object keeps its first location."""
    conn.executemany("INSERT OR IGNORE INTO objects VALUES (?,?,?,?,?,?)", rows)
