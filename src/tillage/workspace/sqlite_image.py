"""Logically consistent images of SQLite databases found in a workspace.

Copying a live database file byte by byte can tear it (a writer commits mid-read) or lose rows that
so far live only in its `-wal`. Here SQLite's own locks keep the bytes still while they are read,
or SQLite's backup API folds the WAL into a private copy, so a rewind yields a database that opens
on its own and holds every row committed before the capture began.

Capture never checkpoints the user's database on purpose: connections are read-only where that
creates no files; the one read-write case (a WAL database with no `-wal` yet, where a read-only
connection would leave `-wal`/`-shm` behind) lets SQLite remove the files it created on close.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tillage.workspace.scratch import IMAGE_PREFIX

SQLITE_HEADER: bytes = b"SQLite format 3\x00"
SIDECAR_SUFFIXES: tuple[str, ...] = ("-wal", "-shm", "-journal")

# A WAL file shorter than its header plus one frame of the smallest page size holds no frame.
_WAL_HEADER = 32
_WAL_FRAME_HEADER = 24
_MIN_PAGE_SIZE = 512
_WAL_NO_FRAMES_BELOW = _WAL_HEADER + _WAL_FRAME_HEADER + _MIN_PAGE_SIZE

# Primary SQLite result codes (extended codes keep them in the low byte).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14

# How often a locked database is retried: dense enough to catch a writer's gaps between commits.
_POLL_FIRST_S = 0.0005
_POLL_MAX_S = 0.002


class SqliteBusy(Exception):  # noqa: N818 (name fixed by the capture interface)
    """Another process kept the database locked past the busy timeout; no image was taken."""


class SqliteUnreadable(Exception):  # noqa: N818 (name fixed by the capture interface)
    """The file has the SQLite header but SQLite cannot read it (corrupt, not a db, no access)."""


@dataclass(frozen=True)
class SqliteImage:
    """Where to read a consistent image of a database, valid only inside `consistent_image`.

    `byte_exact` is True when `path` is the user's own file held still by SQLite's locks, so the
    stored bytes equal the file's; False when `path` is a private logical copy (backup API).
    """

    path: Path
    byte_exact: bool
    wal_mode: bool


def is_sqlite_header(first_bytes: bytes) -> bool:
    """True when `first_bytes` starts with the 16-byte SQLite header, marking a database file."""
    return first_bytes[: len(SQLITE_HEADER)] == SQLITE_HEADER


def sidecar_base(name: str) -> str | None:
    """The database name a `-wal`/`-shm`/`-journal` sidecar belongs to, or None for other names."""
    for suffix in SIDECAR_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


@contextmanager
def consistent_image(
    db_path: Path, tmp_dir: Path, *, busy_timeout_s: float = 5.0
) -> Iterator[SqliteImage]:
    """Yields a consistent image of the database at `db_path`; read `image.path` inside the block.

    A byte-exact image is the user's file under a read transaction: writers (rollback mode) or
    checkpointers (WAL mode) wait until the block ends. Read it through ONE descriptor and close
    that descriptor only after the last read: closing any descriptor of the database file in this
    process drops SQLite's POSIX locks (fcntl semantics). A WAL database with frames is copied
    with the backup API into a temporary file in `tmp_dir`, removed when the block ends.

    Raises SqliteBusy when the database stays locked for `busy_timeout_s` seconds, and
    SqliteUnreadable when SQLite cannot read it; OSError when the file cannot be opened at all or
    (ENOSPC) when `tmp_dir` has no room for a copy.
    """
    deadline = time.monotonic() + busy_timeout_s
    conn = _open_read_transaction(db_path, deadline)
    try:
        try:
            row = conn.execute("PRAGMA journal_mode").fetchone()
        except sqlite3.Error as exc:
            raise _translate(exc, db_path) from exc
        wal_mode = row is not None and str(row[0]).lower() == "wal"
        # Checked only now, under the read transaction: a WAL this short cannot hold a frame our
        # snapshot uses, and no checkpoint can then write into the db file until we end it.
        if not (wal_mode and _wal_may_hold_frames(db_path)):
            yield SqliteImage(path=db_path, byte_exact=True, wal_mode=wal_mode)
            return
        copy = _backup_to_temp(conn, db_path, tmp_dir)
    finally:
        _end(conn)
    # The copy is private, so the user's writers and checkpointers need not wait for the caller.
    try:
        yield SqliteImage(path=copy, byte_exact=False, wal_mode=True)
    finally:
        _remove_temp(copy)


def _open_read_transaction(db_path: Path, deadline: float) -> sqlite3.Connection:
    """Opens a connection holding a read transaction, choosing the mode that leaves no files."""
    header = _read_header(db_path)
    wal_header = len(header) >= 20 and 2 in (header[18], header[19])
    wal = _sidecar(db_path, "-wal")
    shm = _sidecar(db_path, "-shm")
    # A read-only connection to a WAL database creates any missing -wal/-shm and never removes
    # them; a read-write one removes what it created when it closes last. Read-write is only
    # preferred when no frames could be checkpointed into the db file by that close.
    prefer_rw = (
        wal_header and not (wal.exists() and shm.exists()) and not _wal_may_hold_frames(db_path)
    )
    modes = ("rw", "ro") if prefer_rw else ("ro", "rw")
    for attempt, mode in enumerate(modes):
        try:
            return _begin(db_path, mode, deadline)
        except sqlite3.Error as exc:
            code = _primary_code(exc)
            # A hot journal needs a read-write connection to roll back (SQLITE_READONLY_ROLLBACK);
            # a read-only directory needs a read-only one.
            if attempt == 0 and code in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
                continue
            raise _translate(exc, db_path) from exc
    raise AssertionError("unreachable: the last mode either returns or raises")


def _begin(db_path: Path, mode: str, deadline: float) -> sqlite3.Connection:
    """Connects in `mode` and takes SQLite's read lock (SHARED, or a WAL read mark).

    Polls every few milliseconds instead of using SQLite's busy handler, whose sleeps grow to
    100 ms: a rollback-mode writer committing back to back is locked most of the time, and
    sparse retries kept missing the gaps between its commits for seconds.
    """
    # mode=ro/rw (never rwc): a vanished file must not be recreated as an empty database.
    uri = f"{db_path.absolute().as_uri()}?mode={mode}"
    conn = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        delay = _POLL_FIRST_S
        while True:
            try:
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if _primary_code(exc) not in (_SQLITE_BUSY, _SQLITE_LOCKED):
                    raise
                if time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)
    except BaseException:
        conn.close()
        raise


def _backup_to_temp(conn: sqlite3.Connection, db_path: Path, tmp_dir: Path) -> Path:
    """Copies the open read transaction's snapshot into a fresh file (page size and header kept)."""
    import tempfile  # only WAL images need a copy; start-up stays lean

    # Named with this process's ID: a copy whose maker is gone is a leftover (a seal killed
    # while it imaged), removed by `verify` (store/check.py); one whose maker lives is in use.
    fd, name = tempfile.mkstemp(prefix=f"{IMAGE_PREFIX}{os.getpid()}-", suffix=".db", dir=tmp_dir)
    os.close(fd)
    copy = Path(name)
    try:
        dst = sqlite3.connect(f"{copy.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None)
        try:
            # A throwaway file: no journal and no fsync; the copy is discarded on any failure.
            dst.execute("PRAGMA journal_mode=OFF")
            dst.execute("PRAGMA synchronous=OFF")
            # One step (pages=-1) inside our read transaction: a single snapshot, page by page
            # through SQLite's bounded cache, never the whole database in memory.
            conn.backup(dst, pages=-1)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        _remove_temp(copy)
        if _primary_code(exc) == _SQLITE_FULL:
            raise OSError(errno.ENOSPC, f"no space for a copy of {db_path} in {tmp_dir}") from exc
        raise _translate(exc, db_path) from exc
    except BaseException:
        _remove_temp(copy)
        raise
    return copy


def _end(conn: sqlite3.Connection) -> None:
    """Ends the read transaction and closes; a failed ROLLBACK of a read changes nothing."""
    with contextlib.suppress(sqlite3.Error):
        conn.execute("ROLLBACK")
    conn.close()


def _remove_temp(copy: Path) -> None:
    for path in (copy, _sidecar(copy, "-journal")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _read_header(db_path: Path) -> bytes:
    """Reads the 100-byte database header; done before connecting, because closing a descriptor
    of the file once SQLite holds locks on it would drop those locks."""
    with open(db_path, "rb") as f:
        return f.read(100)


def _wal_may_hold_frames(db_path: Path) -> bool:
    try:
        return _sidecar(db_path, "-wal").stat().st_size >= _WAL_NO_FRAMES_BELOW
    except FileNotFoundError:
        return False


def _sidecar(db_path: Path, suffix: str) -> Path:
    return db_path.with_name(db_path.name + suffix)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _translate(exc: sqlite3.Error, db_path: Path) -> Exception:
    """Maps SQLite's error to the two outcomes the caller branches on."""
    name = getattr(exc, "sqlite_errorname", type(exc).__name__)
    if _primary_code(exc) in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return SqliteBusy(f"{db_path} stayed locked by another process ({name}: {exc})")
    return SqliteUnreadable(f"{db_path} is not a readable SQLite database ({name}: {exc})")
