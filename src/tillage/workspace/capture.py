"""Capturing a folder into trees: the stat walk, change detection, reading and chunking files.

A capture reads only what changed since the last seal: the path index remembers each file's
(size, mtime, ctime, inode, mode) and content ID, and a file whose facts all match, and that was
not modified within the racy window of being read, is not read again. Run with no writer, a
capture only computes IDs (for diffing against the live folder) and stores nothing.

A delta walk (`visit`, from a watcher's changed folders) is the same walk with one more rule: a
folder outside `visit` that the last seal recorded, still with the same stat facts in its
parent's listing, is not opened; its tree, counts, notes and rows are carried over.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Generator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tillage.core import codec
from tillage.core.changes import folders_to_visit
from tillage.core.codec import Kind
from tillage.core.format import WHOLE_FILE_MAX
from tillage.core.ids import tree_id
from tillage.core.models import (
    ChunkRef,
    ContentKind,
    Entry,
    EntryFlag,
    EntryKind,
    FidelityNote,
    is_hole,
)
from tillage.core.nesting import run_nested
from tillage.core.paths import CONTROL_DIR, fs_encode, join
from tillage.core.progress import ProgressFn, meter
from tillage.errors import TillageError
from tillage.store.store import ObjectWriter, Store
from tillage.workspace.carry import carry
from tillage.workspace.content import (
    maybe_sparse,
    read_up_to,
    sidecar_facts,
    store_content,
    store_sqlite_image,
    user_xattrs,
)
from tillage.workspace.folderrows import FolderRows
from tillage.workspace.nested import holds_control_dir
from tillage.workspace.pathindex import (
    FACTS,
    FOLDER_FACTS,
    RACY_WINDOW_WHOLE_SECONDS_NS,
    Folder,
    PathIndex,
    Row,
    is_racy,
    stat_facts,
    table,
)
from tillage.workspace.policy import Policy
from tillage.workspace.shards import StaleIndexError
from tillage.workspace.sqlite_image import (
    SIDECAR_SUFFIXES,
    SqliteBusy,
    SqliteUnreadable,
    is_sqlite_header,
    sidecar_base,
)
from tillage.workspace.told import Unchanged, unchanged_entries
from tillage.workspace.trees import TREES, flatten, reaches

READ_RETRIES = 3

# Every open is relative to its folder's descriptor and never follows a symlink, so the walk
# reaches any depth (no path is ever longer than one name) and cannot be led out of the folder.
# O_NONBLOCK: a name swapped for a FIFO between the stat and the open must not hang the walk.
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# Reading a file or folder would update its access time (relatime: the first read after a
# change): a seal would dirty an inode per file, which the durability of everything after it
# then waits for. The owner (or root) may read without; anyone else falls back.
_NOATIME = getattr(os, "O_NOATIME", 0)


def _open(name: str, flags: int, dir_fd: int | None = None) -> int:
    """Opens without touching the access time when the file system lets us."""
    if _NOATIME:
        try:
            return os.open(name, flags | _NOATIME, dir_fd=dir_fd)
        except PermissionError:
            pass  # O_NOATIME is for the owner only: read like anyone else
    return os.open(name, flags, dir_fd=dir_fd)


# Longer absolute paths are handed to SQLite through the folder's descriptor instead.
_PATH_MAX = 4000


@dataclass
class Capture:
    """The outcome of one walk: the root tree and what a snapshot says about the folder."""

    root: bytes = b""
    files: int = 0
    total_bytes: int = 0
    read_files: int = 0
    read_bytes: int = 0
    notes: list[FidelityNote] = field(default_factory=list)
    # A FolderRows when the index is made of this walk's rows (Walker._capture).
    rows: MutableMapping[str, Row] = field(default_factory=dict)
    dirs: MutableMapping[str, bytes] = field(default_factory=dict)
    manifest: dict[str, Entry] | None = None
    folders: MutableMapping[str, Folder] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    # The folders whose entries this walk listed whole (those told by name are in `told`).
    walked: set[str] = field(default_factory=set)
    # Of a delta walk that carried the rest: the folders whose entries it made anew (those it
    # walked and those gone since, with what was in them).
    remade: set[str] | None = None
    # The folders the watcher told by name: the names looked at again in each (the rest of
    # their entries, `kept`, are the last seal's, left out of rows/dirs/folders until carried).
    told: dict[str, set[str]] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    # What the walk cost the file system: folders listed and names stat'ed.
    listed: int = 0
    statted: int = 0


_CONTENT_KINDS = {int(k): k for k in ContentKind}
_FLAGS = {int(f): f for f in (EntryFlag.NONE, EntryFlag.SQLITE_IMAGE)}
# (st_dev, st_ino) -> the first name of a multiply linked file in this walk, and its row.
_Links = dict[tuple[int, int], tuple[str, "Row"]]


@dataclass(frozen=True)
class _Descend:
    """A folder's capture asking the walk for the tree of its open subfolder."""

    path: str
    fd: int
    abs_path: str


# One folder's capture: yields the subfolders it needs walked, is sent their trees, and
# returns its own tree ID.
_Capturing = Generator[_Descend, bytes | None, bytes]
# A subfolder's entry, the same way.
_Stepping = Generator[_Descend, bytes | None, "Entry | None"]


class _NewLinkError(Exception):
    """A delta walk met a name of a multiply linked file the last seal did not see as one: its
    first name may lie in a folder the walk skipped, so the walk starts over in full."""


class Walker:
    """Walks one workspace folder; stores objects through `writer` unless it is None."""

    def __init__(
        self,
        root: Path,
        policy: Policy,
        previous: PathIndex,
        writer: ObjectWriter | None,
        tmp_dir: Path,
        started_ns: int,
        *,
        keep_manifest: bool = False,
        on_progress: ProgressFn | None = None,
        skip_dirs: frozenset[str] = frozenset(),
        visit: frozenset[str] | None = None,
        store: Store | None = None,
        manifest_scopes: Sequence[str] | None = None,
        names: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.root = root
        self.policy = policy
        self.previous = previous.files
        self.previous_dirs = previous.dirs
        self.prior = previous
        # None: list every folder. Otherwise only these (with their ancestors) and every folder
        # that held a multiply linked file: a name added or removed elsewhere changes its
        # entries (link order, nlink) without an event in it.
        self.visit = None if visit is None else visit | folders_to_visit(previous.links)
        # Of the folders to visit, those where the watcher told which names changed: only
        # those names (and the subfolders on the way to a change) are looked at again; every
        # other entry is the one the last seal stored. A folder that held a hard link is
        # always listed whole.
        self.names: dict[str, frozenset[str]] | None = None
        self.visit_children: dict[str, set[str]] = {}
        if self.visit is not None and names is not None:
            self.names = {d: n for d, n in names.items() if d not in previous.links}
            for folder in self.visit:
                if folder:
                    parent, _, child = folder.rpartition("/")
                    self.visit_children.setdefault(parent, set()).add(child)
        self._prior_notes: dict[str, list[str]] | None = None
        # Where the trees of skipped folders are read when a manifest is kept.
        self.trees = store if store is not None else writer.store if writer is not None else None
        # With scopes, a kept manifest need only be whole within them and along the way there
        # (a `--paths` rewind): skipped folders elsewhere are not read back from the store.
        self.manifest_scopes = manifest_scopes
        # Whether the folder being walked is the one the previous index recorded at its path,
        # so that its unchanged subfolders may be skipped.
        self.vouched = False
        self.skipped: set[str] = set()
        self.writer = writer
        self.tmp_dir = tmp_dir
        self.started_ns = started_ns
        self.result = self._capture(keep_manifest)
        # Files counted, toward the last seal's count (its root folder's), for a person's line.
        try:
            last = previous.folders[""][0] if "" in previous.folders else 0
        except StaleIndexError:
            last = 0  # the walk finds it out and starts over without the index
        self.meter = meter(on_progress, "sealing", last, every=16)
        # Absolute folders never captured: the store itself, when someone keeps it inside.
        self.skip_dirs = skip_dirs
        self.links: _Links = {}
        self.carry = True  # skipped folders' rows carried into the result: off for status

    # -- the walk -------------------------------------------------------------------------

    def run(self) -> Capture:
        try:
            self._run_once()
        except StaleIndexError:
            self._forget_prior()
            self._start_over()
            self._run()
        self.result.notes.sort(key=lambda n: (n.path, n.reason))
        if self.meter is not None:
            self.meter.done(self.result.files, self.result.read_bytes)  # the final numbers
        return self.result

    def _run_once(self) -> None:
        try:
            self._run()
        except _NewLinkError:
            # What the aborted walk read stays known, so the full walk does not read it again.
            known = table(self.previous).fork()
            known.update(self.result.rows)
            self.previous = known
            self._start_over()
            self._run()

    def _start_over(self) -> None:
        """Back to no result, for a full walk (no folder skipped)."""
        self.result = self._capture(self.result.manifest is not None)
        self.links = {}
        self.skipped = set()
        self.visit = None
        self.names = None

    def _capture(self, keep_manifest: bool) -> Capture:
        """A result to walk into: with no last index stored whole, the new index is made of its
        rows, kept by folder, a finished one's as one blob (folderrows.py: an object per file
        until the save is most of a cold seal's memory otherwise); else they go into a fork of
        the last index's tables (carry.py), and a blob would only be decoded again."""
        rows = FolderRows() if not (self.prior.exact and self.prior.generation) else {}
        return Capture(manifest={} if keep_manifest else None, rows=rows)

    def _forget_prior(self) -> None:
        """A shard of the last index would not load: walk as if there were none (every file
        read: a hint lost, never a wrong answer)."""
        empty = PathIndex()
        self.prior = empty
        self.previous, self.previous_dirs = empty.files, empty.dirs
        self._prior_notes = None

    def _run(self) -> None:
        root = str(self.root)
        try:
            fd = _open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            self._note(".", f"directory unreadable: {exc.strerror}")
            self.result.walked.add("")
            self.result.root = self._tree("", [])
            return
        try:
            st = os.fstat(fd)
            known = self.prior.folders.get("")
            ident = (st.st_ino, st.st_dev)
            self.vouched = self.visit is not None and known is not None and known[-2:] == ident
            self.result.root = self._walk_tree("", fd, root)
        finally:
            os.close(fd)
        self.result.folders[""] = (
            self.result.files,
            self.result.total_bytes,
            (),
            st.st_mtime_ns,
            st.st_ctime_ns,
            *ident,
        )
        if self.carry:
            carry(self.prior, self.result, self.skipped)

    def _walk_tree(self, rel: str, fd: int, abs_dir: str) -> bytes:
        """Captures the open folder `fd` and everything below it without recursion (any depth
        the kernel allows): a folder's capture yields a `_Descend` for each subfolder."""
        return run_nested(
            self._directory(rel, fd, abs_dir),
            lambda down: self._directory(down.path, down.fd, down.abs_path),
        )

    def _directory(self, rel: str, fd: int, abs_dir: str) -> _Capturing:
        """Captures the open folder `fd` (a step of _walk_tree); only the descriptors of the
        folders above it are open meanwhile, so memory and descriptors grow with depth, not
        with the tree."""
        unchanged = self._unchanged_entries(rel)
        if unchanged is not None:
            self.result.told[rel] = unchanged.check
            partial = yield from self._partial(rel, fd, abs_dir, unchanged)
            return self._tree(rel, partial)
        self.result.walked.add(rel)
        self.result.listed += 1
        try:
            with os.scandir(fd) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            self._note(rel or ".", f"directory unreadable: {exc.strerror}")
            names = []
        # (endswith first: one C call per name, the common case of no sidecar at all)
        sidecars = {
            n for n in names if n.endswith(SIDECAR_SUFFIXES) and sidecar_base(n) is not None
        }
        entries: list[Entry] = []
        databases: set[str] = set()
        for name in names:
            if name in sidecars:
                continue
            found = self._entry(rel, fd, abs_dir, name, sidecars)
            entry = found if found is None or isinstance(found, Entry) else (yield from found)
            if entry is not None:
                entries.append(entry)
                if entry.flags and entry.flags & EntryFlag.SQLITE_IMAGE:
                    databases.add(name)
        for name in sorted(sidecars):
            if sidecar_base(name) in databases:
                continue  # folded into the database's consistent image
            found = self._entry(rel, fd, abs_dir, name, set())
            entry = found if found is None or isinstance(found, Entry) else (yield from found)
            if entry is not None:
                entries.append(entry)
        return self._tree(rel, entries)

    # -- a folder the watcher told by name --------------------------------------------------

    def _unchanged_entries(self, rel: str) -> Unchanged | None:
        """For a folder whose changed names the watcher told: its unchanged entries and the
        names to look at again (told.py). None: list the folder whole (no names told, a
        folder not vouched for, no stored tree, or one told.py would not trust)."""
        if self.names is None or not self.vouched or self.trees is None:
            return None
        told = self.names.get(rel)
        tid = self.previous_dirs.get(rel)
        if told is None or tid is None:
            return None
        if any(sidecar_base(n) is not None for n in told):
            return None
        stored: Sequence[Entry] | None = TREES.get(tid)
        if stored is None:
            try:
                stored = codec.decode_tree(self.trees.read(tid))
            except TillageError:
                return None
            TREES.put(tid, stored)
        check = set(told) | self.visit_children.get(rel, set())
        return unchanged_entries(self.prior, rel, stored, check)

    def _partial(
        self, rel: str, fd: int, abs_dir: str, unchanged: Unchanged
    ) -> Generator[_Descend, bytes | None, list[Entry]]:
        """The folder's entries: the unchanged ones as stored, the told names looked at again."""
        entries: list[Entry] = []
        held = unchanged.subfolders_hold
        for name, entry in unchanged.kept:
            self._keep(join(rel, name), entry, counted=held is not None)
            entries.append(entry)
        if held is not None:
            self.result.files += held[0]
            self.result.total_bytes += held[1]
        for name in sorted(unchanged.check):
            found = self._entry(rel, fd, abs_dir, name, set())
            fresh = found if found is None or isinstance(found, Entry) else (yield from found)
            if fresh is not None:
                entries.append(fresh)
        return entries

    def _keep(self, path: str, entry: Entry, *, counted: bool = False) -> None:
        """Counts an unchanged entry in, with what the last seal recorded of it (its rows are
        carried with the rest: carry.py); a subfolder already `counted` by the caller."""
        result = self.result
        result.kept.append(path)
        if entry.kind is EntryKind.DIR:
            self.skipped.add(path)
            if not counted:
                known = self.prior.folders[path]
                result.files += known[0]
                result.total_bytes += known[1]
            if result.manifest is not None and reaches(path, self.manifest_scopes):
                assert self.trees is not None
                result.manifest.update(
                    flatten(self.trees, entry.content, self.manifest_scopes, prefix=path)
                )
        elif entry.kind is EntryKind.FILE:
            result.files += 1
            result.total_bytes += self.previous[path][10]
        elif entry.kind is EntryKind.SYMLINK:
            result.files += 1
        if entry.kind is not EntryKind.DIR:  # a skipped folder's own notes come by carry()
            for reason in self._notes_of(path):
                result.notes.append(FidelityNote(path, reason))
        if result.manifest is not None:
            result.manifest[path] = entry

    def _notes_of(self, path: str) -> list[str]:
        if self._prior_notes is None:
            self._prior_notes = {}
            for p, reason in self.prior.notes:
                self._prior_notes.setdefault(p, []).append(reason)
        return self._prior_notes.get(path, [])

    def _tree(self, rel: str, entries: list[Entry]) -> bytes:
        encoded = codec.encode_tree(entries)
        tid = tree_id(encoded)
        TREES.put(tid, entries)
        rows = self.result.rows
        if isinstance(rows, FolderRows):
            rows.freeze(rel)  # its files' rows are all in: none is put again by this walk
        # A tree the last seal stored under the same directory is known to exist already.
        if self.writer is not None and self.previous_dirs.get(rel) != tid:
            self.writer.put(Kind.TREE, tid, encoded)
        self.result.dirs[rel] = tid
        return tid

    def _entry(
        self, rel: str, dir_fd: int, abs_dir: str, name: str, sidecars: set[str]
    ) -> Entry | _Stepping | None:
        """The entry of `name`; for a folder, the step (a generator) that captures it, which
        the caller runs with `yield from` (a file costs no generator)."""
        path = join(rel, name)
        if not rel and name == CONTROL_DIR:
            return None
        self.result.statted += 1
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # removed while we walked
        mode = st.st_mode
        is_dir = stat.S_ISDIR(mode)
        if self.policy.excludes(path, is_dir):
            return None
        perm = stat.S_IMODE(mode)
        entry: Entry | None
        # A folder's path is never "" or "/"-ended but for the root "/" itself.
        abs_path = f"{abs_dir}{name}" if abs_dir.endswith("/") else f"{abs_dir}/{name}"
        if is_dir and abs_path in self.skip_dirs:
            return None
        if is_dir:
            return self._subdirectory(path, dir_fd, abs_path, name, st, perm)
        if stat.S_ISLNK(mode):
            try:
                target = os.readlink(fs_encode(name), dir_fd=dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:  # replaced by something that is not a link meanwhile
                self._note(path, f"unreadable: {exc.strerror}")
                return None
            self.result.files += 1
            entry = Entry(
                fs_encode(name),
                EntryKind.SYMLINK,
                perm,
                len(target),
                st.st_mtime_ns,
                ContentKind.TARGET,
                target,
                (),
            )
        elif stat.S_ISREG(mode):
            has_sidecars = bool(sidecars) and any(name + s in sidecars for s in SIDECAR_SUFFIXES)
            aux = sidecar_facts(dir_fd, name) if has_sidecars else ""
            entry = self._file(path, dir_fd, abs_path, name, st, perm, aux)
        else:
            self._note(path, "special file (FIFO, socket or device) is not captured")
            entry = Entry(
                fs_encode(name),
                EntryKind.SPECIAL,
                perm,
                0,
                st.st_mtime_ns,
                ContentKind.NONE,
                b"",
                (),
            )
        if self.result.manifest is not None and entry is not None:
            self.result.manifest[path] = entry
        return entry

    def _subdirectory(
        self, path: str, dir_fd: int, abs_path: str, name: str, st: os.stat_result, perm: int
    ) -> _Stepping:
        entry = yield from self._folder(path, dir_fd, abs_path, name, st, perm)
        if self.result.manifest is not None and entry is not None:
            self.result.manifest[path] = entry
        return entry

    def _folder(
        self, path: str, dir_fd: int, abs_path: str, name: str, st: os.stat_result, perm: int
    ) -> _Stepping:
        facts = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        known = self.prior.folders.get(path) if self.vouched else None
        listed = self.visit is not None and path in self.visit
        unchanged = known is not None and known[FOLDER_FACTS:] == facts
        if unchanged and not listed and known is not None:
            skipped = self._skip(path, name, st, perm, known)
            if skipped is not None:
                return skipped
        # A folder recorded at this path but replaced or moved in since is walked whole: what
        # changed in it was noted under another path.
        same_folder = known is not None and known[-2:] == facts[2:]
        outer = self.vouched
        self.vouched = unchanged or (listed and same_folder)
        files, size = self.result.files, self.result.total_bytes
        try:
            fd = _open(name, _DIR_OPEN, dir_fd)
        except FileNotFoundError:
            self.vouched = outer
            return None
        except OSError as exc:
            self.vouched = outer
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                return None  # replaced by a link or a file since the stat: seen next time
            self._note(path, f"directory unreadable: {exc.strerror}")
            self.result.walked.add(path)
            xattrs = user_xattrs(f"/proc/self/fd/{dir_fd}/{name}")
            tid = self._tree(path, [])
        else:
            if holds_control_dir(fd):  # another workspace nested in this one: not ours
                os.close(fd)
                self.vouched = outer
                return None
            try:
                xattrs = user_xattrs(fd)
                sent = yield _Descend(path, fd, abs_path)
                assert sent is not None  # the subfolder's tree
                tid = sent
            finally:
                os.close(fd)
                self.vouched = outer
        summary = (self.result.files - files, self.result.total_bytes - size, xattrs, *facts)
        self.result.folders[path] = summary
        return Entry(
            fs_encode(name),
            EntryKind.DIR,
            perm,
            0,
            st.st_mtime_ns,
            ContentKind.TREE,
            tid,
            xattrs,
        )

    def _skip(
        self, path: str, name: str, st: os.stat_result, perm: int, known: Folder
    ) -> Entry | None:
        """The entry of a folder the walk need not open, from its recorded summary; None when
        the summary is not enough (no tree recorded, or a manifest whose trees won't read)."""
        tid = self.previous_dirs.get(path)
        if tid is None:
            return None
        if self.result.manifest is not None and reaches(path, self.manifest_scopes):
            if self.trees is None:
                return None
            try:
                stored = flatten(self.trees, tid, self.manifest_scopes, prefix=path)
            except TillageError:
                return None
            self.result.manifest.update(stored)
        files, size, xattrs, *_facts = known
        self.skipped.add(path)
        self.result.files += files
        self.result.total_bytes += size
        self.result.dirs[path] = tid
        self.result.folders[path] = known
        return Entry(
            fs_encode(name), EntryKind.DIR, perm, 0, st.st_mtime_ns, ContentKind.TREE, tid, xattrs
        )

    # -- files ----------------------------------------------------------------------------

    def _file(
        self,
        path: str,
        dir_fd: int,
        abs_path: str,
        name: str,
        st: os.stat_result,
        perm: int,
        aux: str,
    ) -> Entry | None:
        link = b""
        if st.st_nlink > 1:
            folder = path.rpartition("/")[0]
            if self.visit is not None and not self._known_link(path, folder, st):
                raise _NewLinkError(path)
            self.result.links.add(folder)
        first = self.links.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
        if first is not None:
            # A later name of an inode this walk has captured: the same content, never read
            # twice; the entry names the first one so a rewind can link them again.
            link_path, row = first
            link = fs_encode(link_path)
        else:
            facts = stat_facts(st, aux)
            prior = self.previous.get(path)
            if prior is None or prior[:FACTS] != facts:
                # Changing an xattr changes the ctime: unchanged facts mean unchanged xattrs.
                read = self._read_file(path, dir_fd, abs_path, name, aux, st, prior)
                if read is None:
                    return None
                row, st = read
            else:
                row = prior
            if self._racy(st):
                # INV-8: a racily-clean file's facts are not trusted next time (an mtime of -1
                # never matches), but what was read stays a hint for resuming an append.
                row = (row[0], -1, *row[2:])
            if st.st_nlink > 1:
                self.links[(st.st_dev, st.st_ino)] = (path, row)
        self.result.rows[path] = row
        size = row[10]
        self.result.files += 1
        self.result.total_bytes += size
        if self.meter is not None:
            self.meter(self.result.files, self.result.read_bytes)
        flags = _FLAGS[row[9]]
        if link:
            flags |= EntryFlag.HARDLINK
        return Entry(
            fs_encode(name),
            EntryKind.FILE,
            perm,
            size,
            st.st_mtime_ns,
            _CONTENT_KINDS[row[7]],
            row[8],
            row[11],
            flags,
            link,
        )

    def _known_link(self, path: str, folder: str, st: os.stat_result) -> bool:
        """Tells whether the last seal saw this name of a multiply linked file, in a folder
        it recorded as holding one: then every other name is in such a folder too, which a
        delta walk lists, and the first name is the one a full walk would meet first."""
        prior = self.previous.get(path)
        return (
            folder in self.prior.links
            and prior is not None
            and (prior[3], prior[4]) == (st.st_ino, st.st_dev)
        )

    def _read_file(
        self,
        path: str,
        dir_fd: int,
        abs_path: str,
        name: str,
        aux: str,
        seen: os.stat_result,
        previous: Row | None,
    ) -> tuple[Row, os.stat_result] | None:
        """Reads a file's content into the store; returns its row and the facts it was read at."""
        self.result.read_files += 1
        for _attempt in range(READ_RETRIES):
            try:
                fd = _open(name, _FILE_OPEN, dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return None  # replaced by a symlink since the stat: seen next time
                self._note(path, f"unreadable: {exc.strerror}")
                return None
            try:
                # The walk's lstat is the "before"; a retry re-takes it from the open file.
                before = seen if _attempt == 0 else os.fstat(fd)
                sparse = maybe_sparse(before)
                # A sparse file's first bytes may be a hole: only the header is read for it.
                head = (
                    os.pread(fd, 16, 0)
                    if sparse
                    else read_up_to(fd, WHOLE_FILE_MAX + 1, before.st_size)
                )
                if is_sqlite_header(head[:16]) and before.st_size >= 512:
                    kind, content, size, flags = self._read_sqlite(path, dir_fd, abs_path, name, fd)
                else:
                    prior = None if sparse else self._appended_to(previous, before)
                    kind, content, size = store_content(
                        fd, self.writer, prior, None if sparse else head, before
                    )
                    flags = 0
                after = os.fstat(fd)
                xattrs = user_xattrs(fd)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise
                self._note(path, f"unreadable: {exc.strerror}")
                return None
            finally:
                os.close(fd)
            stable = (before.st_size, before.st_mtime_ns, before.st_ino) == (
                after.st_size,
                after.st_mtime_ns,
                after.st_ino,
            )
            # A sparse file's holes were not read: only its allocated bytes count.
            self.result.read_bytes += min(size, after.st_blocks * 512) if sparse else size
            if stable or flags:
                return (*stat_facts(after, aux), kind, content, flags, size, xattrs), after
        self._note(path, "kept changing while being read: the stored bytes may be torn")
        return (-1, 0, 0, 0, 0, 0, aux, kind, content, 0, size, xattrs), after

    def _racy(self, st: os.stat_result) -> bool:
        newest = max(st.st_mtime_ns, st.st_ctime_ns)
        if newest < self.started_ns - RACY_WINDOW_WHOLE_SECONDS_NS:
            return False  # older than the widest window: most files, decided without a call
        return is_racy(st.st_mtime_ns, st.st_ctime_ns, self.started_ns)

    def _appended_to(self, previous: Row | None, now: os.stat_result) -> list[ChunkRef] | None:
        """Returns the chunks to resume after when `previous` may be a prefix of the file now.

        Only a hint: store_content proves the prefix by hashing it before trusting it.
        """
        if (
            previous is None
            or self.writer is None
            or previous[7] != ContentKind.BLOB
            or (previous[3], previous[4]) != (now.st_ino, now.st_dev)
            or now.st_size <= previous[10]
        ):
            return None
        try:
            _size, refs = codec.decode_blob(self.writer.store.read(previous[8]))
        except TillageError:
            return None
        if any(is_hole(ref) for ref in refs):
            return None  # was sparse: its holes are not chunks to re-hash
        return refs[:-1]

    def _read_sqlite(
        self, path: str, dir_fd: int, abs_path: str, name: str, fd: int
    ) -> tuple[int, bytes, int, int]:
        # SQLite opens by path (and finds -wal/-journal beside it by name); a database deeper
        # than a path can name is reached through its folder's descriptor instead.
        where = abs_path if len(abs_path) < _PATH_MAX else f"/proc/self/fd/{dir_fd}/{name}"
        try:
            kind, content, size = store_sqlite_image(fd, Path(where), self.tmp_dir, self.writer)
            return kind, content, size, int(EntryFlag.SQLITE_IMAGE)
        except (SqliteBusy, SqliteUnreadable, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._note(path, f"SQLite database copied raw, not as a consistent image: {exc}")
            kind, content, size = store_content(fd, self.writer)
            return kind, content, size, 0

    def _note(self, path: str, reason: str) -> None:
        self.result.notes.append(FidelityNote(path, reason))
