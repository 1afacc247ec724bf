"""Collections: where an agent's files live durably (rows in a database, objects in a bucket,
files in a folder), addressed by key. A small async protocol and three implementations.

An entry is content (text) plus state: what the projection sets on every entry it commits
(`path`, `hash`, `updated_at`) and whatever a mount's `entry_state` adds. Keys starting with
`_` are the collection's own metadata; a projection never hydrates or flushes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from tillage.core.paths import CONTROL_DIR
from tillage.core.projection import BadPathError, normalize
from tillage.platform.fs import TEMP_MARK
from tillage.projection.places import HostPlace, UnsafePathError

# Query rows (an alias: inside a class with a `list` method, `list[...]` names the method).
Rows = list[tuple[Any, ...]]


class Collection(Protocol):
    """What a projection needs of a collection."""

    async def list(self) -> list[str]:
        """Every key (metadata keys included; the projection skips them)."""
        ...

    async def read(self, key: str) -> str | None:
        """The entry's content, or None when there is no entry."""
        ...

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        """Creates or replaces the entry."""
        ...

    async def delete(self, key: str) -> None:
        """Removes the entry (no entry: nothing to do)."""
        ...


class MemoryCollection:
    """A collection in a dict, with synchronous helpers for tests and wiring."""

    def __init__(self, initial: Mapping[str, str] | None = None) -> None:
        self._content: dict[str, str] = dict(initial or {})
        self._state: dict[str, dict[str, Any]] = {}

    async def list(self) -> list[str]:
        return sorted(self._content)

    async def read(self, key: str) -> str | None:
        return self._content.get(key)

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        self._content[key] = content
        self._state[key] = dict(state)

    async def delete(self, key: str) -> None:
        self._content.pop(key, None)
        self._state.pop(key, None)

    def get(self, key: str) -> str | None:
        """The entry's content now."""
        return self._content.get(key)

    def set(self, key: str, content: str) -> None:
        """Writes an entry directly, as another writer would."""
        self._content[key] = content
        self._state.pop(key, None)

    def remove(self, key: str) -> None:
        """Deletes an entry directly, as another writer would."""
        self._content.pop(key, None)
        self._state.pop(key, None)

    def as_dict(self) -> dict[str, str]:
        """Every key and its content."""
        return dict(self._content)

    def state(self, key: str) -> dict[str, Any] | None:
        """The state the last projection write set on the entry."""
        return self._state.get(key)


STATE_FOLDER = "_state"


class DirectoryCollection:
    """A collection that is a folder: an entry's key is its path below `root` and its
    content the file (written whole, never through a symlink); its state is a JSON file
    under `_state/` (metadata: a projection never hydrates it)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._files = HostPlace(root)
        self.root = self._files.root

    def __repr__(self) -> str:
        return f"DirectoryCollection({str(self.root)!r})"

    async def list(self) -> list[str]:
        return [k for k in await self._files.list([""]) if not k.startswith(STATE_FOLDER + "/")]

    async def read(self, key: str) -> str | None:
        return await self._files.read(_key(key))

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        await self._files.write(_key(key), content)
        await self._files.write(f"{STATE_FOLDER}/{_key(key)}.json", json.dumps(dict(state)))

    async def delete(self, key: str) -> None:
        for path in (_key(key), f"{STATE_FOLDER}/{_key(key)}.json"):
            _unlink(self.root, path)


def _key(key: str) -> str:
    """`key` as the folder's path for it; refused when it would leave the folder, and when the
    folder would keep it under another name (`a//b`, `./a`, `a/`) or never list it (`_state/`,
    tillage's `.tillage`, a temporary name): `list` must give back every key as written."""
    try:
        canonical = normalize(key)
    except BadPathError as exc:
        raise UnsafePathError(f"not a key in a folder: {key!r}") from exc
    if canonical != key:
        raise UnsafePathError(f"not a key in a folder: {key!r} (it would be kept as {canonical!r})")
    if key.split("/", maxsplit=1)[0] in (STATE_FOLDER, CONTROL_DIR) or TEMP_MARK in key:
        raise UnsafePathError(f"not a key in a folder: {key!r} (the folder never lists it)")
    return key


def _unlink(root: Path, path: str) -> None:
    """Removes `root/path` if it is a file reached without a link (a link is refused)."""
    parts = path.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                child = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except FileNotFoundError:
                return
            except OSError as exc:
                raise UnsafePathError(f"{path!r} goes through a link: refused") from exc
            os.close(fd)
            fd = child
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=fd)
    finally:
        os.close(fd)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class SqliteCollection:
    """A collection that is a table of an SQLite database: the embedded default for a harness
    that wants durable collections without a server. The table (`key` TEXT PRIMARY KEY,
    `content` BLOB, `state` TEXT as JSON, `updated_ns` INTEGER) is created when missing; each
    call is its own transaction, on a worker thread so the event loop keeps turning."""

    def __init__(self, path: str | os.PathLike[str], table: str = "entries") -> None:
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"not a table name: {table!r} (letters, digits and _)")
        self.path = Path(os.path.abspath(os.fspath(path)))
        self.table = table
        self._lock = threading.Lock()
        self._ready = False

    def __repr__(self) -> str:
        return f"SqliteCollection({str(self.path)!r}, {self.table!r})"

    async def list(self) -> list[str]:
        rows = await self._run(f"SELECT key FROM {self.table} ORDER BY key", ())
        return [r[0] for r in rows]

    async def read(self, key: str) -> str | None:
        rows = await self._run(f"SELECT content FROM {self.table} WHERE key=?", (key,))
        return None if not rows else bytes(rows[0][0]).decode("utf-8", "surrogateescape")

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        await self._run(
            f"INSERT INTO {self.table}(key, content, state, updated_ns) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET content=excluded.content, state=excluded.state, "
            "updated_ns=excluded.updated_ns",
            (
                key,
                content.encode("utf-8", "surrogateescape"),
                json.dumps(dict(state), sort_keys=True),
                _now_ns(),
            ),
        )

    async def delete(self, key: str) -> None:
        await self._run(f"DELETE FROM {self.table} WHERE key=?", (key,))

    def state(self, key: str) -> dict[str, Any] | None:
        """The state stored with an entry (synchronously, for tests and tools)."""
        rows = self._execute(f"SELECT state FROM {self.table} WHERE key=?", (key,))
        return None if not rows or rows[0][0] is None else dict(json.loads(rows[0][0]))

    async def _run(self, sql: str, args: tuple[Any, ...]) -> Rows:
        return await asyncio.to_thread(self._execute, sql, args)

    def _execute(self, sql: str, args: tuple[Any, ...]) -> Rows:
        with self._lock:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                if not self._ready:
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {self.table}(key TEXT PRIMARY KEY, "
                        "content BLOB NOT NULL, state TEXT, updated_ns INTEGER)"
                    )
                    self._check_columns(conn)
                    self._ready = True
                return list(conn.execute(sql, args))
            finally:
                conn.close()

    def _check_columns(self, conn: sqlite3.Connection) -> None:
        """A table that was there already must have the collection's columns: said by name
        (not as the first query's "no such column")."""
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({self.table})")}
        lacking = [c for c in COLUMNS if c not in have]
        if lacking:
            raise sqlite3.OperationalError(
                f"table {self.table} has no column {', '.join(lacking)}: a collection's table "
                f"has the columns {COLUMN_TEXT} (name a table that does not exist yet and it "
                "is created so)"
            )


COLUMNS = ("key", "content", "state", "updated_ns")
COLUMN_TEXT = "key TEXT PRIMARY KEY, content BLOB, state TEXT, updated_ns INTEGER"


def _now_ns() -> int:
    import time

    return time.time_ns()
