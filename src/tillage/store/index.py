"""The advisory SQLite index: where objects live, and the log's facts in queryable form.

Everything here can be rebuilt from the packs and the publication log (INV-4), so deleting the
file loses nothing; it only makes the next command slower.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA_VERSION = 1

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
    bytes INT NOT NULL, grade TEXT NOT NULL, agent TEXT, turn TEXT, session TEXT);
CREATE INDEX IF NOT EXISTS snapshots_ws ON snapshots(workspace, seq);
CREATE TABLE IF NOT EXISTS pins(snapshot TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS pathindex(workspace TEXT PRIMARY KEY, data BLOB NOT NULL);
"""


def connect(path: Path) -> sqlite3.Connection:
    """Opens the index with the settings every process shares (WAL, explicit transactions)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.executescript(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;"
        "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-32768;"
    )
    conn.executescript(SCHEMA)
    return conn


@contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """An immediate write transaction (avoids deferred-upgrade deadlocks between processes)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


def existing_ids(conn: sqlite3.Connection, ids: Iterable[bytes]) -> set[bytes]:
    """Returns which of `ids` the index knows."""
    found: set[bytes] = set()
    batch: list[bytes] = []
    for object_id in ids:
        batch.append(object_id)
        if len(batch) == 500:
            found.update(_lookup(conn, batch))
            batch = []
    if batch:
        found.update(_lookup(conn, batch))
    return found


def _lookup(conn: sqlite3.Connection, batch: list[bytes]) -> list[bytes]:
    marks = ",".join("?" * len(batch))
    rows = conn.execute(f"SELECT id FROM objects WHERE id IN ({marks})", batch)
    return [bytes(r[0]) for r in rows]
