"""Projections run by the command line: collections named by URI, and the baseline kept between
processes, so `till project hydrate` (one process) and `till project flush` (a later one) are
one projection of a folder.

A folder's record lives under the store's home, never in the folder (a mount at its root
would flush it): `<home>/projections/<key>.json`, where key is the first 32 hex digits of the
SHA-256 of the folder's real path, holding {format, folder, mounts, baseline}. It is replaced
whole (atomic_write), and every run holds `<key>.lock` from reading it to writing it, so two
runs on one folder take turns. Entry claims stay in-process, as the library's are: runs of two
folders over one collection are kept apart by the three-way verdict (a conflict), not a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tillage.core.paths import CONTROL_DIR
from tillage.core.projection import BadPathError, normalize_prefix, route
from tillage.errors import echo
from tillage.platform.fs import atomic_write
from tillage.platform.locks import file_lock
from tillage.projection.collections import Collection, DirectoryCollection, SqliteCollection
from tillage.projection.engine import DuplicateMountError, FlushReport, Mount, Projection
from tillage.projection.engine import UnflushedEditsError as LibraryUnflushedEditsError
from tillage.projection.errors import (
    BadMountError,
    CollectionFailedError,
    FolderUnreadableError,
    NoMountsError,
    PlaceFailedError,
    PlaceReplacedError,
    StateDamagedError,
    UnflushedEditsError,
    UnsafePlacePathError,
)
from tillage.projection.places import HostPlace, PlaceUnreadableError, UnsafePathError

DEFAULT_TABLE = "entries"
RECORD_FORMAT = 1
T = TypeVar("T")
LOCK_TIMEOUT = 30.0
# What SQLite keeps beside a database: hidden from the folder's listing with it.
_SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")


# -- mounts named by URI ---------------------------------------------------------------------


@dataclass(frozen=True)
class MountSpec:
    """One mount as a command line names it. `uri` is canonical (`sqlite:/abs/x.db#table`,
    `dir:/abs/folder`): the same string for two runs addressing the same rows, so it is the
    mount's collection ID."""

    prefix: str
    uri: str
    writable: bool
    scheme: str
    path: Path
    table: str | None = None

    def open(self) -> Collection:
        """The collection (creating nothing until it is first used, except a `dir:` folder,
        which DirectoryCollection makes when missing)."""
        if self.scheme == "sqlite":
            return SqliteCollection(self.path, self.table or DEFAULT_TABLE)
        return DirectoryCollection(self.path)


def parse_mount(text: str, *, writable: bool, base: Path, user_home: Path | None) -> MountSpec:
    """A `PREFIX=URI` flag value as a mount; BadMountError, naming the flag, when it is not one.
    A relative PATH is taken from `base`; `~/` from `user_home`."""
    flag = "--mount" if writable else "--read-only"
    raw_prefix, sep, uri = text.partition("=")
    if not sep:
        raise BadMountError(f"{flag} {echo(text)} is not PREFIX=URI")
    try:
        prefix = normalize_prefix(raw_prefix)
    except BadPathError as exc:
        raise BadMountError(f"{flag} {echo(text)}: the prefix would leave the folder") from exc
    if prefix == CONTROL_DIR or prefix.startswith(CONTROL_DIR + "/"):
        raise BadMountError(f"{flag} {echo(text)}: {CONTROL_DIR} is tillage's own folder")
    scheme, path, table = parse_uri(uri, flag=flag, base=base, user_home=user_home)
    canonical = f"sqlite:{path}#{table}" if scheme == "sqlite" else f"dir:{path}"
    return MountSpec(prefix, canonical, writable, scheme, path, table)


def parse_uri(
    uri: str, *, flag: str, base: Path, user_home: Path | None
) -> tuple[str, Path, str | None]:
    """(scheme, absolute path, table or None) of `sqlite:PATH[#TABLE]` or `dir:PATH`."""
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme not in ("sqlite", "dir"):
        raise BadMountError(f"{flag}: {echo(uri)} names no known collection (sqlite: or dir:)")
    table: str | None = None
    if scheme == "sqlite":
        rest, _, table = rest.rpartition("#") if "#" in rest else (rest, "", DEFAULT_TABLE)
        try:
            SqliteCollection(base, table)  # checks the name only: nothing is opened
        except ValueError as exc:
            raise BadMountError(f"{flag}: {echo(uri)}: {exc}") from exc
    if not rest:
        raise BadMountError(f"{flag}: {echo(uri)} names no PATH")
    if rest.startswith("//"):
        raise BadMountError(
            f"{flag}: {echo(uri)}: write {scheme}:/absolute/path or {scheme}:relative/path "
            "(no `//`)"
        )
    return scheme, _absolute(rest, base, user_home), table


def _absolute(text: str, base: Path, user_home: Path | None) -> Path:
    if user_home is not None and (text == "~" or text.startswith("~/")):
        text = str(user_home) + text[1:]
    return Path(os.path.abspath(text if text.startswith("/") else os.path.join(base, text)))


def parse_mounts(
    mounts: Sequence[str], read_only: Sequence[str], *, base: Path, user_home: Path | None
) -> tuple[MountSpec, ...]:
    """Every flag value as a mount, writable ones first; one collection or one prefix named
    twice is BadMountError (before anything is opened)."""
    specs = [parse_mount(m, writable=True, base=base, user_home=user_home) for m in mounts]
    specs += [parse_mount(m, writable=False, base=base, user_home=user_home) for m in read_only]
    _check_unique(specs)
    return tuple(specs)


def _check_unique(specs: Sequence[MountSpec]) -> None:
    uris: set[str] = set()
    prefixes: set[str] = set()
    for spec in specs:
        if spec.uri in uris:
            raise BadMountError(f"the collection {spec.uri} is mounted twice")
        if spec.prefix in prefixes:
            where = repr(spec.prefix) if spec.prefix else "the folder's root"
            raise BadMountError(f"two collections are mounted at {where}")
        uris.add(spec.uri)
        prefixes.add(spec.prefix)


def check_apart(specs: Sequence[MountSpec], folder: Path) -> None:
    """Refuses a `dir:` collection that is the folder, inside it or holding it: each hydrate
    would lay the collection down into itself."""
    real = Path(os.path.realpath(folder))
    for spec in specs:
        if spec.scheme != "dir":
            continue
        root = Path(os.path.realpath(spec.path))
        if root == real or real in root.parents or root in real.parents:
            raise BadMountError(
                f"{spec.uri} overlaps the folder it would be projected into ({folder}): "
                "a folder collection must be outside it"
            )


# -- the folder as the projection sees it ----------------------------------------------------


class FolderPlace:
    """The folder (a HostPlace) with the collections' own files that live inside it (an SQLite
    database and its sidecars) left out of its listing and never written over; failures
    reading or writing a file are the public place_failed error. It remembers what it wrote,
    so a hydrate can say how many entries each mount laid down."""

    def __init__(self, folder: Path, hidden: frozenset[str]) -> None:
        self.host = HostPlace(folder)
        self.hidden = hidden
        self.written: list[str] = []

    async def read(self, path: str) -> str | None:
        try:
            return await self.host.read(path)
        except OSError as exc:
            raise PlaceFailedError(
                f"{path!r} in {self.host.root} could not be read: {exc}"
            ) from exc

    async def write(self, path: str, content: str) -> None:
        if path in self.hidden:
            raise UnsafePlacePathError(
                f"{path!r} is a collection's own database inside {self.host.root}: not replaced"
            )
        try:
            await self.host.write(path, content)
        except OSError as exc:
            raise PlaceFailedError(
                f"{path!r} in {self.host.root} could not be written: {exc}"
            ) from exc
        self.written.append(path)

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        return [p for p in await self.host.list(prefixes) if p not in self.hidden]


def hidden_paths(specs: Sequence[MountSpec], folder: Path) -> frozenset[str]:
    """The folder-relative paths of SQLite databases (and sidecars) kept inside the folder."""
    real = os.path.realpath(folder)
    found: set[str] = set()
    for spec in specs:
        if spec.scheme != "sqlite":
            continue
        inside = os.path.relpath(os.path.realpath(spec.path), real)
        if inside != "." and not inside.startswith(".." + os.sep) and inside != "..":
            found.update(inside + suffix for suffix in _SQLITE_SIDECARS)
    return frozenset(found)


class GuardedCollection:
    """A collection whose failures (SQLite, the file system, a key that cannot be a file) are
    the public collection_failed error, naming the collection: the work did not reach it."""

    def __init__(self, inner: Collection, uri: str) -> None:
        self.inner = inner
        self.uri = uri

    async def list(self) -> list[str]:
        with self._failures("listed"):
            return await self.inner.list()

    async def read(self, key: str) -> str | None:
        with self._failures("read"):
            return await self.inner.read(key)

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        with self._failures("written"):
            await self.inner.write(key, content, state)

    async def delete(self, key: str) -> None:
        with self._failures("changed"):
            await self.inner.delete(key)

    @contextlib.contextmanager
    def _failures(self, verb: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise CollectionFailedError(
                f"{self.uri} could not be {verb}: {type(exc).__name__}: {exc}",
                details={"collection": self.uri},
            ) from exc


# -- the record kept between processes -------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """What the store's home keeps for one folder: the mounts of its last hydrate and the
    baseline its last run committed."""

    folder: str
    mounts: tuple[tuple[str, str, bool], ...]  # (prefix, uri, writable)
    baseline: dict[str, str]
    # The folder's (device, inode) when it was recorded, and a token kept on the folder as an
    # extended attribute (an inode number is reused at once by a folder made again where the
    # file system allows, so the token decides when it could be set).
    identity: tuple[int, int] | None = None
    token: str | None = None


def record_paths(home: Path, folder: Path) -> tuple[Path, Path]:
    """(record, lock) of a folder, under `<home>/projections/`."""
    real = os.path.realpath(folder)
    key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    where = home / "projections"
    return where / f"{key}.json", where / f"{key}.lock"


def load_record(path: Path) -> Record | None:
    """The folder's record, None when it has none; StateDamagedError when it cannot be read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(data)
        mounts = tuple(
            (str(m["prefix"]), str(m["uri"]), bool(m["writable"])) for m in doc["mounts"]
        )
        baseline = {str(k): str(v) for k, v in dict(doc["baseline"]).items()}
        ident = doc.get("identity")
        identity = (int(ident[0]), int(ident[1])) if ident else None
        token = doc.get("token")
        return Record(
            folder=str(doc["folder"]),
            mounts=mounts,
            baseline=baseline,
            identity=identity,
            token=str(token) if token else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise StateDamagedError(f"the projection record {path} cannot be read: {exc}") from exc


def save_record(
    path: Path, folder: Path, specs: Sequence[MountSpec], baseline: dict[str, str]
) -> None:
    """Replaces the folder's record whole (readers see the old one or the new one)."""
    doc = {
        "format": RECORD_FORMAT,
        "folder": str(folder),
        "mounts": [{"prefix": s.prefix, "uri": s.uri, "writable": s.writable} for s in specs],
        "baseline": dict(sorted(baseline.items())),
        "identity": list(folder_identity(folder)),
        "token": folder_token(folder),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, indent=1).encode() + b"\n")


def folder_identity(folder: Path) -> tuple[int, int]:
    """The folder's (device, inode): what tells it from another folder made at its path."""
    st = os.stat(folder)
    return st.st_dev, st.st_ino


TOKEN_XATTR = "user.tillage.projection"


def folder_token(folder: Path) -> str | None:
    """The token on the folder (set on first use), or None where the file system keeps no
    user extended attributes: a folder made again at the path has none, or another."""
    try:
        return os.getxattr(folder, TOKEN_XATTR).decode()
    except OSError:
        pass
    from tillage.platform.names import random_hex

    token = random_hex(16)
    try:
        os.setxattr(folder, TOKEN_XATTR, token.encode())
    except OSError:
        return None
    return token


def is_replaced(record: Record, folder: Path) -> bool:
    """Whether `folder` is another folder than the one `record` describes."""
    if record.token is not None:
        try:
            return os.getxattr(folder, TOKEN_XATTR).decode() != record.token
        except OSError:
            return True
    return record.identity is not None and record.identity != folder_identity(folder)


def recorded_specs(record: Record, path: Path) -> tuple[MountSpec, ...]:
    """The mounts a record names, parsed again (their URIs are absolute)."""
    try:
        return tuple(
            parse_mount(f"{prefix}={uri}", writable=writable, base=Path("/"), user_home=None)
            for prefix, uri, writable in record.mounts
        )
    except BadMountError as exc:
        raise StateDamagedError(f"the projection record {path} names a bad mount: {exc}") from exc


def owned_by(baseline: Mapping[str, str], specs: Sequence[MountSpec]) -> dict[str, str]:
    """The part of a baseline under the writable mounts of `specs` (the rest is inert: no
    flush could write or delete there)."""
    prefixes = [s.prefix for s in specs]
    kept = {}
    for path, digest in baseline.items():
        routed = route(path, prefixes)
        if routed is not None and specs[routed[0]].writable:
            kept[path] = digest
    return kept


# -- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hydrated:
    """What a hydrate laid down: each mount and how many of its entries."""

    mounts: tuple[tuple[MountSpec, int], ...]


@dataclass(frozen=True)
class Flushed:
    """A flush's report, with the mounts it used."""

    mounts: tuple[MountSpec, ...]
    report: FlushReport


def hydrate_folder(home: Path, folder: Path, specs: Sequence[MountSpec] | None) -> Hydrated:
    """Lays every mount down in `folder` (None: the mounts its last hydrate recorded) and
    records the mounts and the baseline for a later flush. The record's earlier baseline is
    kept for paths the collections no longer hold: an edit there is then a conflict, never a
    silent re-creation of an entry someone removed."""
    if specs:
        check_apart(specs, folder)  # before anything is created, the lock included
    record_path, lock_path = record_paths(home, folder)
    with file_lock(lock_path, timeout=LOCK_TIMEOUT, what=f"the projection of {folder}"):
        record = load_record(record_path)
        chosen = _chosen(specs, record, record_path, folder)
        baseline = owned_by(record.baseline, chosen) if record is not None else {}
        projection, place = _projection(folder, chosen, baseline)
        _run(projection, projection.hydrate(keep_edits=True), record_path, folder, chosen)
    prefixes = [s.prefix for s in chosen]
    counts = [0] * len(chosen)
    for path in place.written:
        routed = route(path, prefixes)
        if routed is not None:
            counts[routed[0]] += 1
    return Hydrated(mounts=tuple(zip(chosen, counts, strict=True)))


def flush_folder(home: Path, folder: Path, specs: Sequence[MountSpec] | None) -> Flushed:
    """Flushes `folder` into its writable collections (None: the mounts its last hydrate
    recorded) against the recorded baseline, and records the baseline the flush leaves."""
    if specs:
        check_apart(specs, folder)
    record_path, lock_path = record_paths(home, folder)
    with file_lock(lock_path, timeout=LOCK_TIMEOUT, what=f"the projection of {folder}"):
        record = load_record(record_path)
        chosen = _chosen(specs, record, record_path, folder)
        if record is not None and record.baseline and is_replaced(record, folder):
            raise PlaceReplacedError(
                f"{folder} is not the folder that was hydrated (it was removed and made "
                f"again): flushing it would delete the {len(record.baseline)} entries it "
                "owns; nothing was flushed"
            )
        # The record keeps the mounts of the last hydrate, and the whole baseline: a flush
        # naming other mounts uses them for this run only (a folder never hydrated records
        # them), and a path under none of them is never decided, so its base is kept as is.
        kept = recorded_specs(record, record_path) if record and record.mounts else chosen
        baseline = record.baseline if record is not None else {}
        projection, _ = _projection(folder, chosen, baseline)
        report = _run(projection, projection.flush(), record_path, folder, kept)
    return Flushed(mounts=chosen, report=report)


def _chosen(
    specs: Sequence[MountSpec] | None, record: Record | None, record_path: Path, folder: Path
) -> tuple[MountSpec, ...]:
    if specs:
        return tuple(specs)
    if record is None or not record.mounts:
        raise NoMountsError(f"no mount was given, and {folder} has not been hydrated")
    recorded = recorded_specs(record, record_path)
    check_apart(recorded, folder)
    return recorded


def _projection(
    folder: Path, specs: Sequence[MountSpec], baseline: Mapping[str, str]
) -> tuple[Projection, FolderPlace]:
    place = FolderPlace(folder, hidden_paths(specs, folder))
    mounts = [Mount(s.prefix, GuardedCollection(s.open(), s.uri), s.uri, s.writable) for s in specs]
    try:
        return Projection(mounts, place, baseline=baseline), place
    except DuplicateMountError as exc:  # parse_mounts refuses these first; a record might not
        raise BadMountError(str(exc)) from exc


def _run(
    projection: Projection,
    work: Coroutine[Any, Any, T],
    record_path: Path,
    folder: Path,
    specs: Sequence[MountSpec],
) -> T:
    """Runs a hydrate or flush to its end and records the baseline it leaves, also when it
    stops part-way (what it committed before is kept). The library's own exceptions leave as
    the public errors that name them."""
    try:
        try:
            result = asyncio.run(work)
        except UnsafePathError as exc:
            raise UnsafePlacePathError(str(exc)) from exc
        except PlaceUnreadableError as exc:
            raise FolderUnreadableError(f"{folder}: {exc}; nothing was read or written") from exc
        except LibraryUnflushedEditsError as exc:
            raise UnflushedEditsError(
                f"{exc}; nothing was written", details={"paths": exc.paths}
            ) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            save_record(record_path, folder, specs, projection.committed())
        raise
    save_record(record_path, folder, specs, projection.committed())
    return result
