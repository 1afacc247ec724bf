"""Test helpers: describing a folder exactly, and building realistic workspaces."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def manifest(root: Path, *, mtimes: bool = True) -> dict[str, Any]:
    """Returns every path below `root` (but `.tillage/`) with its type, mode, bytes and mtime."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            rel_dir = ""
            if ".tillage" in dirnames:
                dirnames.remove(".tillage")
        for name in sorted(dirnames) + sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(os.path.join(dirpath, name))
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                value: Any = ("link", os.readlink(os.path.join(dirpath, name)))
            elif stat.S_ISDIR(st.st_mode):
                value = ("dir", mode)
            else:
                value = ("file", mode, Path(dirpath, name).read_bytes())
            if mtimes and not stat.S_ISDIR(st.st_mode):
                value = (*value, st.st_mtime_ns)
            out[rel] = value
    return out


def git(root: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout


def make_project(root: Path) -> None:
    """A small but real project: a git repo, ignored files, .env, a SQLite db, a symlink."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "app.py").write_text("def main():\n    return 42\n")
    (root / "src" / "pkg" / "util.py").write_text("X = 1\n" * 50)
    (root / "README.md").write_text("# demo\n")
    run = root / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(0o755)
    (root / ".gitignore").write_text(".env\nbuild/\n*.db\n")
    (root / ".env").write_text("API_KEY=secret\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(os.urandom(3000))
    (root / "empty_dir").mkdir()
    (root / "link_to_readme").symlink_to("README.md")
    db = sqlite3.connect(root / "dev.db")
    db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
    db.executemany("INSERT INTO users(name) VALUES (?)", [(f"user{i}",) for i in range(500)])
    db.commit()
    db.close()
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")


def rows(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return int(conn.execute("SELECT count(*) FROM users").fetchone()[0])
    finally:
        conn.close()


# A tree deeper than PATH_MAX (4096): 30 folders with 200-character names (about 6,000
# characters of path), reachable only through directory descriptors.
DEEP_NAMES = [f"{i:02d}" + "d" * 198 for i in range(30)]


def open_deep(folder: Path, *, create: bool = False) -> int:
    """Opens (making it first if asked) the bottom of DEEP_NAMES below `folder`, one level at a
    time from its parent's descriptor; the caller closes the returned fd."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for name in DEEP_NAMES:
        if create:
            os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd


def write_at(dir_fd: int, name: str, data: bytes) -> None:
    """Writes a whole file `name` below an open folder."""
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        os.write(out, data)
    finally:
        os.close(out)


def read_deep(folder: Path, leaf: str) -> bytes:
    """Reads file `leaf` at the bottom of DEEP_NAMES below `folder`."""
    fd = open_deep(folder)
    try:
        leaf_fd = os.open(leaf, os.O_RDONLY, dir_fd=fd)
        try:
            return os.read(leaf_fd, 1 << 16)
        finally:
            os.close(leaf_fd)
    finally:
        os.close(fd)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now (a test server's, or one known to
    refuse); the caller retries if it is taken later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        assert isinstance(port, int)
        return port


def free_ports_above(run: int) -> int:
    """A base P with P+1..P+run free on 127.0.0.1 right now, for universes' ports (far from
    3000, so tests running at once elsewhere on the machine do not meet)."""
    import random

    from tillage.platform.ports import can_listen

    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 60000)
        if all(can_listen(base + i) for i in range(1, run + 1)):
            return base
    raise AssertionError("no run of free ports found")


def process_gone(pid: int) -> bool:
    """True once `pid` has exited whole: no process, or a zombie whose every thread is done.
    (A dying process loses its command line before it closes its files, and a killed
    thread-group leader shows as a zombie while its other threads still exit holding them, so
    a watcher absent from daemon_pids may still hold its lock for a moment.)"""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return False
    return True


SPARSE_SIZE = 256 << 20
SPARSE_DATA = ((0, 256 << 10), (100 << 20, 512 << 10), ((256 << 20) - (256 << 10), 256 << 10))


def make_sparse(path: Path, size: int = SPARSE_SIZE) -> bytes:
    """Writes a sparse file of `size` apparent bytes holding 1 MiB of random data in three
    places (the start, the middle, the very end) and holes between; returns its digest."""

    with open(path, "wb") as f:
        f.truncate(size)
        for offset, length in SPARSE_DATA:
            f.seek(offset)
            f.write(os.urandom(length))
    return digest(path)


def digest(path: Path) -> bytes:
    """The SHA-256 of a file's bytes, read in pieces (holes read back as zeros)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(8 << 20):
            h.update(piece)
    return h.digest()


def allocated(path: Path) -> int:
    """The bytes a file holds on disk (its allocated blocks)."""
    return os.stat(path).st_blocks * 512
