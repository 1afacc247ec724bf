"""Consistent SQLite images: real databases, real writer processes, bounded readiness waits."""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tillage.workspace.sqlite_image import (
    SIDECAR_SUFFIXES,
    SQLITE_HEADER,
    SqliteBusy,
    SqliteImage,
    SqliteUnreadable,
    consistent_image,
    is_sqlite_header,
    sidecar_base,
)

WAIT_S = 30.0

# A child that runs one SQL statement per stdin line and answers "ok <rows>" or "err <message>";
# "crash" exits at once without committing or closing, as a killed process would.
SQL_CHILD = r"""
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
print("ready", flush=True)
for line in sys.stdin:
    sql = line.strip()
    if sql == "crash":
        os._exit(0)
    try:
        rows = conn.execute(sql).fetchall()
    except sqlite3.Error as exc:
        print("err", exc, flush=True)
    else:
        print("ok", repr(rows), flush=True)
conn.close()
"""

# A writer that commits 5-row transactions as fast as it can until stdin reaches EOF; WAL mode
# also truncates the WAL now and then so captures meet both an empty and a non-empty WAL.
LOOP_WRITER = r"""
import os, select, sqlite3, sys
db, journal = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db, isolation_level=None, timeout=30)
conn.execute(f"PRAGMA journal_mode={journal}")
txns = 0
while True:
    conn.execute("BEGIN IMMEDIATE")
    for _ in range(5):
        conn.execute("INSERT INTO t(v) VALUES (?)", (os.urandom(300),))
    conn.execute("COMMIT")
    txns += 1
    if journal == "wal" and txns % 7 == 0:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    if txns == 1:
        print("ready", flush=True)
    if select.select([sys.stdin], [], [], 0)[0]:
        break
total = conn.execute("SELECT count(*) FROM t").fetchone()[0]
conn.close()
print("done", txns, total, flush=True)
"""


class Child:
    """A Python child process driven line by line, with bounded waits on its answers."""

    def __init__(self, script: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buf = b""

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str, timeout: float = WAIT_S) -> str:
        """Returns the child's next line, failing unless it starts with `prefix`."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                pytest.fail(f"child gave no line within {timeout}s (wanted {prefix!r})")
            piece = os.read(fd, 65536)
            if not piece:
                pytest.fail(f"child exited early: {self._stderr()}")
            self._buf += piece
        raw, self._buf = self._buf.split(b"\n", 1)
        line = raw.decode()
        assert line.startswith(prefix), (line, self._stderr() if prefix != "err" else "")
        return line

    def sql(self, statement: str) -> str:
        self.send(statement)
        return self.expect("ok")

    def finish(self, timeout: float = WAIT_S) -> int:
        """Closes stdin and waits for the exit status."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def _stderr(self) -> str:
        assert self.proc.stderr is not None
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def spawn(children: list[Child], script: str, *args: str) -> Child:
    child = Child(script, *args)
    children.append(child)
    return child


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def make_db(path: Path, *, journal: str = "delete", rows: int = 100, page_size: int = 4096) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
    conn.execute("CREATE INDEX t_v ON t(v)")
    conn.execute("BEGIN")
    for _ in range(rows):
        conn.execute("INSERT INTO t(v) VALUES (?)", (os.urandom(200),))
    conn.execute("COMMIT")
    conn.close()


def snapshot_copy(image: SqliteImage, dest_dir: Path) -> Path:
    """Copies the image as the caller does (one descriptor, read to the end) to a lone `x.db`."""
    dest_dir.mkdir(exist_ok=True)
    out = dest_dir / "x.db"
    for stale in [out, *(dest_dir / f"x.db{s}" for s in SIDECAR_SUFFIXES)]:
        stale.unlink(missing_ok=True)
    shutil.copyfile(image.path, out)
    return out


def check_standalone(path: Path) -> int:
    """Opens `path` with no sidecars; asserts integrity and returns the row count of `t`."""
    assert not any(path.with_name(path.name + s).exists() for s in SIDECAR_SUFFIXES)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        count: int = conn.execute("SELECT count(*) FROM t").fetchone()[0]
        return count
    finally:
        conn.close()


def wal_writer(children: list[Child], db: Path) -> Child:
    child = spawn(children, SQL_CHILD, str(db))
    child.expect("ready")
    child.sql("PRAGMA journal_mode=WAL")
    child.sql("PRAGMA wal_autocheckpoint=0")
    return child


# -- names ---------------------------------------------------------------------------------------


def test_header_and_sidecar_names() -> None:
    assert is_sqlite_header(SQLITE_HEADER)
    assert is_sqlite_header(SQLITE_HEADER + b"\x10\x00rest")
    assert not is_sqlite_header(SQLITE_HEADER[:15])
    assert not is_sqlite_header(b"SQLite format 3 ")
    assert not is_sqlite_header(b"")
    assert sidecar_base("app.db-wal") == "app.db"
    assert sidecar_base("app.db-shm") == "app.db"
    assert sidecar_base("x-journal") == "x"
    assert sidecar_base("plain.txt") is None
    assert sidecar_base("-wal") is None
    assert sidecar_base("app.db-wal.bak") is None


# -- no writer -----------------------------------------------------------------------------------


def test_rollback_db_is_byte_exact_and_untouched(tmp_path: Path) -> None:
    db = tmp_path / "ws" / "app.db"
    db.parent.mkdir()
    make_db(db)
    before, files = sha(db), listing(db.parent)
    with consistent_image(db, tmp_path) as image:
        assert image == SqliteImage(path=db, byte_exact=True, wal_mode=False)
        data = image.path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == before == sha(db)
    assert listing(db.parent) == files
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.db").write_bytes(data)
    assert check_standalone(tmp_path / "out" / "x.db") == 100


def test_quiet_wal_db_is_byte_exact_and_leaves_no_files(tmp_path: Path) -> None:
    db = tmp_path / "ws" / "app.db"
    db.parent.mkdir()
    make_db(db, journal="wal")
    assert listing(db.parent) == ["app.db"]
    before, mtime = sha(db), db.stat().st_mtime_ns
    with consistent_image(db, tmp_path) as image:
        assert image.byte_exact and image.wal_mode and image.path == db
        out = snapshot_copy(image, tmp_path / "out")
    assert listing(db.parent) == ["app.db"]  # SQLite removed the -wal/-shm it created
    assert (sha(db), db.stat().st_mtime_ns) == (before, mtime)
    assert check_standalone(out) == 100


def test_awkward_file_names_are_opened_by_uri(tmp_path: Path) -> None:
    for journal in ("delete", "wal"):
        db = tmp_path / journal / "we ird?#%20&mode=rwc.db"
        db.parent.mkdir()
        make_db(db, journal=journal, rows=7)
        with consistent_image(db, tmp_path) as image:
            out = snapshot_copy(image, tmp_path / f"out-{journal}")
        assert check_standalone(out) == 7
        assert not any(p.name.endswith(".db") and p != db for p in db.parent.iterdir())


# -- WAL frames ----------------------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1024, 4096, 65536])
def test_rows_only_in_wal_are_imaged_without_touching_the_db(
    tmp_path: Path, children: list[Child], page_size: int
) -> None:
    db = tmp_path / "ws" / "app.db"
    db.parent.mkdir()
    make_db(db, journal="wal", rows=10, page_size=page_size)
    writer = wal_writer(children, db)
    for _ in range(20):
        writer.sql("INSERT INTO t(v) SELECT randomblob(200) FROM t LIMIT 10")
    assert (db.parent / "app.db-wal").stat().st_size > 0
    db_sum, wal_sum = sha(db), sha(db.parent / "app.db-wal")
    files = listing(db.parent)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with consistent_image(db, tmp) as image:
        assert not image.byte_exact and image.wal_mode
        assert image.path.parent == tmp and image.path.exists()
        out = snapshot_copy(image, tmp_path / "out")
    assert listing(tmp) == []
    assert (sha(db), sha(db.parent / "app.db-wal")) == (db_sum, wal_sum)
    assert listing(db.parent) == files
    assert check_standalone(out) == 210
    header = out.read_bytes()[:100]
    assert (header[18], header[19]) == (2, 2)  # still a WAL database once restored
    assert int.from_bytes(header[16:18], "big") == (1 if page_size == 65536 else page_size)
    conn = sqlite3.connect(out)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    assert writer.finish() == 0


def test_temp_copy_is_removed_when_the_block_raises(tmp_path: Path, children: list[Child]) -> None:
    db = tmp_path / "app.db"
    make_db(db, journal="wal")
    writer = wal_writer(children, db)
    writer.sql("INSERT INTO t(v) VALUES (x'00')")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with pytest.raises(RuntimeError, match="caller failed"), consistent_image(db, tmp) as image:
        assert not image.byte_exact and image.path.exists()
        raise RuntimeError("caller failed")
    assert listing(tmp) == []
    assert writer.finish() == 0


def test_crash_leftover_wal_without_shm(tmp_path: Path, children: list[Child]) -> None:
    db = tmp_path / "app.db"
    make_db(db, journal="wal", rows=5)
    writer = wal_writer(children, db)
    writer.sql("INSERT INTO t(v) SELECT randomblob(50) FROM t")
    writer.send("crash")
    assert writer.finish() == 0
    (tmp_path / "app.db-shm").unlink()
    db_sum, wal_sum = sha(db), sha(tmp_path / "app.db-wal")
    with consistent_image(db, tmp_path) as image:
        assert not image.byte_exact
        out = snapshot_copy(image, tmp_path / "out")
    assert check_standalone(out) == 10
    # Not checkpointed: the read-only connection recovered the WAL index into a new -shm.
    assert (sha(db), sha(tmp_path / "app.db-wal")) == (db_sum, wal_sum)


def test_empty_wal_reader_blocks_checkpoints_into_the_db_file(
    tmp_path: Path, children: list[Child]
) -> None:
    db = tmp_path / "app.db"
    make_db(db, journal="wal", rows=10)
    writer = wal_writer(children, db)
    writer.sql("PRAGMA busy_timeout=200")
    writer.sql("PRAGMA wal_checkpoint(TRUNCATE)")
    assert (tmp_path / "app.db-wal").stat().st_size == 0
    before = sha(db)
    with consistent_image(db, tmp_path) as image:
        assert image.byte_exact and image.wal_mode and image.path == db
        writer.sql("INSERT INTO t(v) SELECT randomblob(300) FROM t")
        busy = writer.sql("PRAGMA wal_checkpoint(TRUNCATE)")
        out = snapshot_copy(image, tmp_path / "out")
    assert busy.startswith("ok [(1,"), busy  # the checkpointer was kept out
    assert sha(out) == before
    assert check_standalone(out) == 10
    assert writer.sql("PRAGMA wal_checkpoint(TRUNCATE)").startswith("ok [(0,")
    assert writer.finish() == 0
    assert check_standalone_copy(db, tmp_path / "after") == 20


def check_standalone_copy(db: Path, dest: Path) -> int:
    dest.mkdir()
    shutil.copyfile(db, dest / "x.db")
    return check_standalone(dest / "x.db")


# -- concurrent writers --------------------------------------------------------------------------


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_captures_during_continuous_writes(
    tmp_path: Path, children: list[Child], journal: str
) -> None:
    db = tmp_path / "ws" / "app.db"
    db.parent.mkdir()
    make_db(db, journal=journal, rows=0)
    writer = spawn(children, LOOP_WRITER, str(db), journal)
    writer.expect("ready")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    counts: list[int] = []
    exact = 0
    for i in range(25):
        with consistent_image(db, tmp) as image:
            assert image.wal_mode == (journal == "wal")
            exact += image.byte_exact
            out = snapshot_copy(image, tmp_path / f"out{i % 2}")
        count = check_standalone(out)
        assert count % 5 == 0, "an image caught half a transaction"
        counts.append(count)
    writer.send("stop")
    done = writer.expect("done").split()
    assert writer.finish() == 0
    assert counts == sorted(counts) and counts[0] >= 5
    assert len(set(counts)) > 1, "the writer never committed between captures"
    assert int(done[2]) >= counts[-1]
    assert listing(tmp) == []
    if journal == "delete":
        assert exact == 25


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_uncommitted_transaction_in_another_process(
    tmp_path: Path, children: list[Child], journal: str
) -> None:
    db = tmp_path / "app.db"
    make_db(db, journal=journal, rows=10)
    writer = spawn(children, SQL_CHILD, str(db))
    writer.expect("ready")
    writer.sql("PRAGMA wal_autocheckpoint=0")
    writer.sql("INSERT INTO t(v) SELECT randomblob(100) FROM t")  # 20 committed
    writer.sql("BEGIN")
    if journal == "wal":
        # A small cache spills uncommitted pages into the WAL as frames with no commit mark.
        writer.sql("PRAGMA cache_size=5")
        for _ in range(6):
            writer.sql("INSERT INTO t(v) SELECT randomblob(500) FROM t LIMIT 200")
        wal_size = (tmp_path / "app.db-wal").stat().st_size
    else:
        writer.sql("INSERT INTO t(v) SELECT randomblob(100) FROM t")
    with consistent_image(db, tmp_path, busy_timeout_s=2.0) as image:
        out = snapshot_copy(image, tmp_path / "out")
    if journal == "wal":
        assert (tmp_path / "app.db-wal").stat().st_size >= wal_size > 100_000
    assert check_standalone(out) == 20
    writer.sql("COMMIT")
    assert writer.finish() == 0


def test_hot_journal_is_rolled_back_first(tmp_path: Path, children: list[Child]) -> None:
    db = tmp_path / "app.db"
    make_db(db, rows=100)
    writer = spawn(children, SQL_CHILD, str(db))
    writer.expect("ready")
    writer.sql("PRAGMA cache_size=10")
    writer.sql("BEGIN")
    for _ in range(5):
        writer.sql("INSERT INTO t(v) SELECT randomblob(400) FROM t LIMIT 500")
    writer.send("crash")
    assert writer.finish() == 0
    journal = tmp_path / "app.db-journal"
    assert journal.stat().st_size > 0 and db.stat().st_size > 400_000  # spilled, hot
    with consistent_image(db, tmp_path) as image:
        assert image.byte_exact and not image.wal_mode
        out = snapshot_copy(image, tmp_path / "out")
    assert not journal.exists()
    assert check_standalone(out) == 100


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_exclusive_lock_raises_busy_within_the_timeout(
    tmp_path: Path, children: list[Child], journal: str
) -> None:
    db = tmp_path / "app.db"
    make_db(db, journal=journal)
    holder = spawn(children, SQL_CHILD, str(db))
    holder.expect("ready")
    if journal == "wal":
        holder.sql("PRAGMA locking_mode=EXCLUSIVE")
    holder.sql("BEGIN EXCLUSIVE")
    holder.sql("INSERT INTO t(v) VALUES (x'01')")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = time.monotonic()
    with pytest.raises(SqliteBusy), consistent_image(db, tmp, busy_timeout_s=0.5):
        pytest.fail("an image was taken under another process's exclusive lock")
    assert 0.4 <= time.monotonic() - started < 3.0
    assert listing(tmp) == []
    holder.sql("COMMIT")
    assert holder.finish() == 0
    with consistent_image(db, tmp) as image:
        out = snapshot_copy(image, tmp_path / "out")
    assert check_standalone(out) == 101


def test_garbage_after_a_valid_header_is_unreadable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(SQLITE_HEADER + os.urandom(8192))
    with pytest.raises(SqliteUnreadable), consistent_image(junk, tmp_path):
        pytest.fail("garbage was imaged")

    broken = tmp_path / "broken.db"
    make_db(broken)
    data = bytearray(broken.read_bytes())
    data[100:4096] = os.urandom(3996)  # page 1 (the schema b-tree) is scrambled
    broken.write_bytes(bytes(data))
    with pytest.raises(SqliteUnreadable), consistent_image(broken, tmp_path):
        pytest.fail("a database with a scrambled schema page was imaged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.db", "junk.db"]


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), consistent_image(tmp_path / "gone.db", tmp_path):
        pytest.fail("a missing file was imaged")
    assert listing(tmp_path) == []
