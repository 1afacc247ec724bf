"""Writing planned actions into a folder: every object read and verified before the folder is
touched (staging), then files put in place several at a time without ever following a symlinked
parent, and one sync of the file system before it returns (INV-1, INV-3, INV-7, INV-9).

A path that existed is replaced by a rename from a temporary sibling, a new path is written as
an anonymous file and linked in whole, so no file is ever seen half-written. A file a
concurrent writer changed since the caller's seal is rescued into the store first.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from tillage.core.models import (
    ChunkRef,
    ContentKind,
    Entry,
    EntryFlag,
    EntryKind,
    is_hole,
)
from tillage.core.paths import fs_decode, parse
from tillage.core.progress import Progress, ProgressFn
from tillage.core.rewind_plan import (
    Action,
    Op,
    Tally,
    action_size,
    batch_kind,
    by_folders,
    grouped,
    parallel_write,
    parted,
    space_needed,
)
from tillage.errors import TillageError
from tillage.platform import failpoints
from tillage.platform.errors import DiskFullError
from tillage.platform.folders import remove_tree, spread_new_folders, syncfs
from tillage.platform.fs import (
    current_umask,
    fd_budget,
    open_subdir_nofollow,
    pwrite_all,
    raise_if_disk_full,
    replace_from_temp,
    set_link_mtime,
    temp_name,
)
from tillage.store.errors import StoreDamagedError
from tillage.store.packs import Location, PackFiles, decode_record, record_whole
from tillage.workspace.attach import Workspace
from tillage.workspace.content import store_content
from tillage.workspace.journal.flight import Flight
from tillage.workspace.journal.intents import pre_trigger
from tillage.workspace.nested import holds_control_dir
from tillage.workspace.pathindex import Row, stat_facts
from tillage.workspace.seal import SealOptions, publish_tree
from tillage.workspace.sqlite_image import SIDECAR_SUFFIXES
from tillage.workspace.trees import chunks_of, write_manifest

# Threads that stage records and write large files: reads, writes, zstd and BLAKE3 release the
# GIL, so on two cores four threads keep both busy while others wait on the kernel.
WORKERS = 4
# A file smaller than this is written on the thread that runs the plan, not in the pool. Its
# handful of short system calls each hand the GIL to another thread and wait to get it back:
# spread over four threads, the 5,000 files of the standard workload took 0.80 s, on one 0.59.
SHARED_FILE_BYTES = 1 << 20
_NOT_SUPPORTED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV)


# Folder fds a rewind keeps open at most (least recently used closed first): a tree of any
# number of folders (node_modules has thousands) must fit the fd limit with room to spare.
DIR_FD_BUDGET = fd_budget(256, 4)
# Groups of large files the pool may hold at once, ahead of this thread (see _write_many); each
# holds copies of its folders' fds (up to four), so fewer under a small limit on open files.
IN_FLIGHT = max(1, min(2 * WORKERS, DIR_FD_BUDGET // 8))
# A file at least this large is synced as soon as it is written (see _put_file).
EARLY_SYNC_BYTES = 8 * 1024 * 1024
SPREAD_MAX = 64  # folders marked to spread the new folders made in them (see _spread_new_folders)


class _DamagedError(Exception):
    """An object failed verification in a worker thread; the main thread forgets it (INV-4)."""

    def __init__(self, object_id: bytes, error: TillageError) -> None:
        super().__init__(str(error))
        self.object_id = object_id
        self.error = error


class _RetryError(Exception):
    """Something is in the way of a write (a folder a concurrent writer made): the main thread
    retries it on its own, where the directory cache may change."""


class Applier:
    """Executes rewind actions below the root without ever following a symlinked parent.

    `stage` reads and verifies every object the rewind will write before anything in the folder
    changes (INV-7); `run` applies the actions, files in WORKERS threads, and makes the result
    durable with one sync of the workspace's file system before it returns.
    """

    def __init__(
        self,
        ws: Workspace,
        expected: dict[str, Entry] | None,
        on_progress: ProgressFn | None = None,
    ) -> None:
        self.ws = ws
        self.expected = expected
        self.on_progress = on_progress
        self.rescued: dict[str, Entry] = {}
        self._root_fd = os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY)
        self._dir_cache: dict[str, int] = {}
        self._writer = ws.store.writer()
        self._lock = threading.Lock()  # guards the writer and the rescued map across threads
        self._refs: dict[str, list[ChunkRef]] = {}
        self._locations: dict[bytes, Location] = {}
        self._packs = PackFiles(ws.store.packs_dir)
        self._umask = current_umask()
        self._durable = True
        # Folders whose mode tillage knows (created or checked), and those lent u+rwx.
        self._dir_modes: dict[str, int] = {}
        self._lent: dict[str, int] = {}
        # Folders marked to spread the new folders made in them (ext4's `T`), to unmark.
        self._spread: list[Callable[[], None]] = []
        self._meta_done: set[str] = set()
        self._deleted: set[str] = set()
        # What was written, as path-index rows, so the next seal need not read it again.
        self.written: dict[str, Row] = {}

    # -- staging: read and verify before touching ------------------------------------------

    def stage(self, actions: tuple[Action, ...]) -> None:
        """Reads and checks every record the actions will write (INV-3, INV-7).

        A missing or damaged object raises here, before anything in the folder changes. The
        chunk lists and object locations are kept, so the writes need no index lookups.
        """
        try:
            files = [
                a
                for a in actions
                if a.op is Op.WRITE
                and a.entry is not None
                and a.entry.kind is EntryKind.FILE
                and not a.entry.flags & EntryFlag.HARDLINK
            ]
            seen: set[bytes] = set()
            work: list[tuple[int, list[bytes]]] = []
            for action in files:
                assert action.entry is not None
                refs = chunks_of(self.ws.store, action.entry)
                self._refs[action.path] = refs
                fresh = [r.id for r in refs if not is_hole(r) and r.id not in seen]
                seen.update(fresh)
                work.append((action.entry.size, fresh))
            self._locations = self.ws.store.locations(list(seen))
            for object_id in seen:
                if object_id not in self._locations:
                    raise StoreDamagedError(
                        f"object {object_id.hex()[:12]} is missing from the store"
                    )
            for pack in {loc.pack for loc in self._locations.values()}:
                if not (self.ws.store.packs_dir / pack).is_file():
                    raise StoreDamagedError(f"pack {pack} is missing from the store")
            self._check_space(actions)
            total = sum(size for size, _ids in work)
            self._report("staging", 0, len(work), 0, total)
            done = done_bytes = 0
            with ThreadPoolExecutor(WORKERS) as pool:
                # Files in groups, as they are written: large ones in the pool, the rest here
                # meanwhile (see SHARED_FILE_BYTES).
                large, small = parted(work, lambda item: item[0], SHARED_FILE_BYTES)
                try:
                    futures = {
                        pool.submit(self._verify, _ids_of(group)): group
                        for group in grouped(large, lambda item: item[0])
                    }
                    for group in grouped(small, lambda item: item[0]):
                        self._verify(_ids_of(group))
                        done += len(group)
                        done_bytes += _bytes_of(group)
                        self._report("staging", done, len(work), done_bytes, total)
                    for future in as_completed(futures):
                        future.result()
                        done += len(futures[future])
                        done_bytes += _bytes_of(futures[future])
                        self._report("staging", done, len(work), done_bytes, total)
                except _DamagedError as bad:
                    pool.shutdown(cancel_futures=True)
                    loc = self._locations[bad.object_id]
                    if (self.ws.store.packs_dir / loc.pack).exists():
                        self.ws.store.forget_damaged(bad.object_id)
                    raise bad.error from None
                except BaseException:
                    pool.shutdown(cancel_futures=True)
                    raise
            failpoints.hit("rewind.after_staging")
        except BaseException as exc:
            self._close()
            if isinstance(exc, OSError):
                raise_if_disk_full(exc)
            raise

    def _check_space(self, actions: tuple[Action, ...]) -> None:
        """Refuses, before the folder is touched, a rewind whose files and folders would not
        fit on the workspace's disk beside what is there now (the space the files it replaces
        give back is not counted, as when every file was staged first)."""
        st = os.fstatvfs(self._root_fd)
        block = st.f_frsize or 4096
        data = {
            path: sum(r.length for r in refs if not is_hole(r)) for path, refs in self._refs.items()
        }
        need_bytes, need_inodes = space_needed(actions, data, block)
        free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * block
        inodes = st.f_ffree if os.geteuid() == 0 else st.f_favail
        if need_bytes > free or (st.f_files and need_inodes > inodes):
            raise DiskFullError(
                f"no space left for the rewind: it needs {need_bytes} bytes and "
                f"{need_inodes} files, the disk has {free} bytes and {inodes} files free"
            )

    def _verify(self, ids: list[bytes]) -> None:
        """Proves each record is there and whole: its header names the object and its CRC-32
        over header and payload holds (INV-3). That is what damage breaks (a flipped byte, a
        torn or missing pack); the BLAKE3 proof of the bytes themselves is made again as each
        object is written, so nothing unproven reaches the folder (INV-4)."""
        for object_id in ids:
            loc = self._locations[object_id]
            data = self._packs.pread(loc.pack, loc.length, loc.offset)
            if not record_whole(data, loc.length, object_id):
                raise _DamagedError(
                    object_id,
                    StoreDamagedError(f"object {object_id.hex()[:12]} is damaged in the store"),
                )

    def _read(self, object_id: bytes) -> bytes:
        """Returns an object's bytes, verified against its ID (any thread)."""
        loc = self._locations[object_id]
        data = self._packs.pread(loc.pack, loc.length, loc.offset)
        try:
            _kind, _id, raw = decode_record(data, object_id)
        except TillageError as exc:
            raise _DamagedError(object_id, exc) from exc
        return raw

    def _report(self, stage: str, files: int, files_total: int, done: int, total: int) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(stage, files, files_total, done, total))

    # -- applying -------------------------------------------------------------------------

    def run(self, actions: tuple[Action, ...], *, durable: bool = True) -> None:
        """Applies the actions in order; the folder's data is durable when it returns (unless
        told it need not be: a disposable copy)."""
        self._durable = durable
        try:
            self._spread_new_folders(actions)
            self._run(actions)
            self._restore_lent()
            if durable:
                syncfs(self._root_fd)
        finally:
            try:
                self._restore_lent()
                while self._spread:
                    self._spread.pop()()
                self._writer.commit()  # rescued bytes are durable however the run ended
            finally:
                self._close()

    def _spread_new_folders(self, actions: tuple[Action, ...]) -> None:
        """Asks the file system to place the folders this rewind makes away from inodes freed
        moments ago (after an agent's `rm -rf`, the very case a rewind is for, ext4 would
        otherwise check each freed inode before every creation): the existing folders that get
        new folders are marked for the rewind (platform/folders.py: spread_new_folders)."""
        made = {a.path for a in actions if a.op is Op.MAKE_DIR}
        parents = {p.rpartition("/")[0] for p in made} - made
        # The shallowest first, and a bounded number: each mark holds an fd until the end.
        for parent in sorted(parents, key=lambda p: (p.count("/"), p))[:SPREAD_MAX]:
            try:
                fd = self._dir(parent, create=False)
            except (OSError, TillageError):
                continue  # made by an action that replaces a file: the plan will say
            restore = spread_new_folders(fd)
            if restore is not None:
                self._spread.append(restore)

    def _run(self, actions: tuple[Action, ...]) -> None:
        """Runs the plan in its order; folders of one depth are made together, then files and
        symlinks in groups, in WORKERS threads; deletions, hard links and metadata here."""
        files = [a for a in actions if parallel_write(a)]
        done = Tally("applying", len(files), sum(action_size(a) for a in files), self._report)
        with ThreadPoolExecutor(WORKERS) as pool:
            pending: list[Action] = []
            for n, action in enumerate(actions):
                if n == 0:
                    self._do(action)
                    done.add([action] if parallel_write(action) else [])
                    failpoints.hit("rewind.after_first_action")
                    continue
                kind = batch_kind(action)
                if pending and kind != batch_kind(pending[0]):
                    self._flush(pool, pending, done)
                    pending = []
                if kind:
                    pending.append(action)
                else:
                    self._do(action)
                    self._trim_dirs()
            if pending:
                self._flush(pool, pending, done)

    def _flush(self, pool: ThreadPoolExecutor, batch: list[Action], done: Tally) -> None:
        try:
            if batch[0].op is Op.MAKE_DIR:
                self._make_dirs(batch)
            else:
                self._write_many(pool, batch, done)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise

    def _make_dirs(self, batch: list[Action]) -> None:
        """Makes folders on this thread, shallowest first, and keeps their fds for the files
        written into them (a pool cost four times the 0.017 s 1,095 folders take here)."""
        for action in sorted(batch, key=lambda a: a.path.count("/")):
            assert action.entry is not None
            dir_fd, name = self._parent_fd(action.path, create=True)
            fd, mode = self._mkdir(dir_fd, name, action.entry)
            old = self._dir_cache.pop(action.path, None)
            if old is not None:
                os.close(old)
            self._dir_cache[action.path] = fd
            self._dir_modes[action.path] = mode
            self._deleted.discard(action.path)
            self._trim_dirs()

    def _mkdir(self, dir_fd: int, name: str, entry: Entry) -> tuple[int, int]:
        """Makes one folder (any thread) and returns its fd and the mode it was made with."""
        mode = self._make_dir_at(dir_fd, name, entry)
        return open_subdir_nofollow(dir_fd, name, create=False), mode

    def _write_many(self, pool: ThreadPoolExecutor, batch: list[Action], done: Tally) -> None:
        """Writes files and symlinks: large files in groups in the pool, the rest here meanwhile
        (see SHARED_FILE_BYTES), waiting for the pool only at the end of the batch (flight.py).
        Folders are opened here, so the directory cache is only ever touched by this thread."""
        retry: list[Action] = []

        def landed(outcome: tuple[list[Action], list[Action]]) -> None:
            retry.extend(outcome[1])
            done.add(outcome[0])

        with Flight(pool, IN_FLIGHT, self._put_group, landed) as flight:
            for chunk in by_folders(batch, DIR_FD_BUDGET // 2):
                placed = [(a, *self._parent_fd(a.path, create=True)) for a in chunk]
                large, small = parted(placed, _placed_size, SHARED_FILE_BYTES)
                for group in grouped(large, _placed_size):
                    flight.submit(group)
                for group in grouped(small, _placed_size):
                    landed(self._put_group(group))
                self._trim_dirs()  # the pool writes through fds of its own
            flight.finish()
        for action in retry:
            self._do(action)
            done.add([action])

    def _put_group(self, group: list[tuple[Action, int, str]]) -> tuple[list[Action], list[Action]]:
        written: list[Action] = []
        blocked: list[Action] = []
        for action, dir_fd, name in group:
            try:
                self._put(action, dir_fd, name)
            except _RetryError:
                blocked.append(action)
            else:
                written.append(action)
        return written, blocked

    def _close(self) -> None:
        for fd in self._dir_cache.values():
            os.close(fd)
        self._dir_cache.clear()
        self._packs.close()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1
        self._writer.close()

    def _dir(self, path: str, *, create: bool) -> int:
        """Returns the fd of workspace folder `path` ('' is the root), opened one level at a
        time from its parent's fd so no symlink is ever followed and depth never matters;
        fds are cached. From the nearest folder above it that is open, without recursion: a
        tree ~2,000 folders deep (a path of 4,096 bytes) is opened as one of two."""
        if not path:
            return self._root_fd
        fd = self._dir_cache.pop(path, None)
        if fd is None:
            below = [path]
            above = path.rpartition("/")[0]
            while above and above not in self._dir_cache:
                below.append(above)
                above = above.rpartition("/")[0]
            if above:
                fd = self._dir_cache.pop(above)
                self._dir_cache[above] = fd  # most recently used last
            else:
                fd = self._root_fd
            for folder in reversed(below):
                fd = open_subdir_nofollow(fd, folder.rpartition("/")[2], create=create)
                if folder != path:
                    self._dir_cache[folder] = fd
        self._dir_cache[path] = fd  # most recently used last
        return fd

    def _trim_dirs(self) -> None:
        """Closes the least recently used folder fds beyond DIR_FD_BUDGET, so a tree of any
        number of folders fits any fd limit; only called when no thread uses the cache's fds
        (the pool writes through copies of its own: flight.py)."""
        while len(self._dir_cache) > DIR_FD_BUDGET:
            os.close(self._dir_cache.pop(next(iter(self._dir_cache))))

    def _parent_fd(self, path: str, *, create: bool) -> tuple[int, str]:
        """Returns the fd of `path`'s folder, made writable for the rewind, and its name."""
        parent, _, name = path.rpartition("/")
        fd = self._dir(parent, create=create)
        if parent not in self._dir_modes:
            self._lend(parent, fd)
        return fd, name

    def _lend(self, path: str, fd: int) -> None:
        """Lends u+rwx to a folder the rewind writes into (a read-only folder can be rewound);
        its recorded mode comes back at the end (the plan's folder metadata, or the old one)."""
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        self._dir_modes[path] = mode
        if mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):  # not ours: the write itself will say so
                os.fchmod(fd, mode | 0o700)
                self._dir_modes[path] = mode | 0o700
                self._lent[path] = mode

    def _restore_lent(self) -> None:
        lent, self._lent = self._lent, {}
        for path, mode in lent.items():
            if path in self._meta_done or path in self._deleted:
                continue
            with contextlib.suppress(OSError, TillageError):
                os.fchmod(self._dir(path, create=False), mode)

    def _invalidate(self, path: str) -> None:
        for key in [k for k in self._dir_cache if k == path or k.startswith(path + "/")]:
            os.close(self._dir_cache.pop(key))
            self._dir_modes.pop(key, None)
            self._lent.pop(key, None)

    def _do(self, action: Action) -> None:
        try:
            if action.op is Op.DELETE:
                self._delete(action.path)
            elif action.op is Op.MAKE_DIR:
                self._make_dir(action.path, action.entry)
            elif action.op is Op.WRITE:
                self._write(action.path, action.entry)
            elif action.op is Op.SET_META:
                self._set_meta(action.path, action.entry)
        except OSError as exc:
            raise_if_disk_full(exc)
            raise

    # -- guarding a concurrent writer -------------------------------------------------------

    def _guard(self, dir_fd: int, name: str, path: str) -> None:
        """Rescues a file a concurrent writer changed since the pre-rewind seal (INV-9)."""
        if self.expected is None:
            return
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            return
        known = self.expected.get(path)
        if known is not None and known.flags & EntryFlag.SQLITE_IMAGE:
            return  # its consistent image was sealed moments ago; raw bytes would be worse
        if (
            known is not None
            and known.kind is EntryKind.FILE
            and (known.size == st.st_size and known.mtime_ns == st.st_mtime_ns)
        ):
            return
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            with self._lock:
                kind, content, size = store_content(fd, self._writer)
        finally:
            os.close(fd)
        rescued = Entry(
            path.rsplit("/", 1)[-1].encode("utf-8", "surrogateescape"),
            EntryKind.FILE,
            stat.S_IMODE(st.st_mode),
            size,
            st.st_mtime_ns,
            ContentKind(kind),
            content,
        )
        with self._lock:
            self.rescued[path] = rescued

    def publish_rescue(self, undo: str, op: str = "rewind") -> str:
        """Seals the state before the landing (`op`, whose undo is `undo`) with the rescued
        bytes in place; returns its ID."""
        assert self.expected is not None
        manifest = dict(self.expected)
        manifest.update(self.rescued)
        with self.ws.store.writer() as writer:
            root = write_manifest(writer, manifest)
            files = sum(
                1 for e in manifest.values() if e.kind in (EntryKind.FILE, EntryKind.SYMLINK)
            )
            size = sum(e.size for e in manifest.values() if e.kind is EntryKind.FILE)
            row = publish_tree(
                self.ws.store,
                self.ws.id,
                writer,
                root,
                files,
                size,
                [],
                SealOptions(
                    trigger=pre_trigger(op), label=f"rescued during {op} (undo {undo[:12]})"
                ),
            )
        return row.id

    # -- actions --------------------------------------------------------------------------

    def _delete(self, path: str) -> None:
        try:
            dir_fd, name = self._parent_fd(path, create=False)
        except FileNotFoundError:
            return
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        self._guard(dir_fd, name, path)
        self._deleted.add(path)
        if stat.S_ISDIR(st.st_mode):
            self._invalidate(path)
            # A workspace nested in it (its own `.tillage/`) is another's: it stays.
            remove_tree(dir_fd, name, spare=holds_control_dir)
        else:
            os.unlink(name, dir_fd=dir_fd)

    def _make_dir(self, path: str, entry: Entry | None) -> None:
        assert entry is not None
        dir_fd, name = self._parent_fd(path, create=True)
        self._dir_modes[path] = self._make_dir_at(dir_fd, name, entry)
        self._deleted.discard(path)

    def _make_dir_at(self, dir_fd: int, name: str, entry: Entry) -> int:
        """Makes folder `name` (any thread) and returns the mode it now has. It is made with
        its own mode plus u+rwx (the rewind writes into it); the exact mode is set with the
        folder's metadata at the end, deepest first."""
        mode = (entry.mode | 0o700) & 0o7777
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
        except FileExistsError:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                return stat.S_IMODE(st.st_mode)
            os.unlink(name, dir_fd=dir_fd)
            os.mkdir(name, mode, dir_fd=dir_fd)
        return mode & ~self._umask

    def _existed(self, path: str) -> bool:
        """Whether `path` was in the folder when the rewind began (a guess that only picks the
        faster safe way to write it: a wrong guess falls back to the other way)."""
        return self.expected is not None and path in self.expected and path not in self._deleted

    def _write(self, path: str, entry: Entry | None) -> None:
        """Writes one file, symlink or hard link in this thread (the serial path)."""
        assert entry is not None
        dir_fd, name = self._parent_fd(path, create=True)
        try:
            self._put(Action(Op.WRITE, path, entry), dir_fd, name)
        except _RetryError:
            self._invalidate(path)  # a folder is in the way: it was sealed, so remove it
            remove_tree(dir_fd, name, spare=holds_control_dir)
            self._put(Action(Op.WRITE, path, entry), dir_fd, name)

    def _put(self, action: Action, dir_fd: int, name: str) -> None:
        """Puts one file, symlink or hard link in place (any thread).

        A path that was in the folder is replaced by a rename from a temporary sibling (INV-1),
        after its live bytes are checked against the pre-rewind seal (INV-9). A new path is
        written as an anonymous file (O_TMPFILE) and linked in whole, so it appears complete or
        not at all, and a killed rewind leaves nothing behind.
        """
        entry, path = action.entry, action.path
        assert entry is not None
        try:
            if entry.kind is EntryKind.SYMLINK:
                self._put_symlink(path, entry, dir_fd, name)
            elif entry.flags & EntryFlag.HARDLINK:
                self._put_link(path, entry, dir_fd, name)
            else:
                self._put_file(path, entry, dir_fd, name)
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise _RetryError() from exc
            raise_if_disk_full(exc)
            raise
        if entry.flags & EntryFlag.SQLITE_IMAGE:
            for suffix in SIDECAR_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name + suffix, dir_fd=dir_fd)

    def _put_symlink(self, path: str, entry: Entry, dir_fd: int, name: str) -> None:
        if not self._existed(path):
            try:
                os.symlink(entry.content, name, dir_fd=dir_fd)  # appears whole: atomic
            except FileExistsError:
                pass
            else:
                set_link_mtime(name, dir_fd, entry.mtime_ns)
                return
        self._guard(dir_fd, name, path)
        tmp = temp_name(name)
        os.symlink(entry.content, tmp, dir_fd=dir_fd)
        set_link_mtime(tmp, dir_fd, entry.mtime_ns)
        replace_from_temp(tmp, dir_fd, name)

    def _put_link(self, path: str, entry: Entry, dir_fd: int, name: str) -> None:
        """Makes `path` a second name of its first name's inode (the plan validated `link`:
        a workspace path, in scope, a plain file of the same content)."""
        source = parse(fs_decode(entry.link))
        src_parent, _, src_name = source.rpartition("/")
        src_fd = self._dir(src_parent, create=False)
        if not self._existed(path):
            try:
                os.link(src_name, name, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                return
            except FileExistsError:
                pass
        self._guard(dir_fd, name, path)
        tmp = temp_name(name)
        os.link(src_name, tmp, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        replace_from_temp(tmp, dir_fd, name)

    def _put_file(self, path: str, entry: Entry, dir_fd: int, name: str) -> None:
        refs = self._refs.get(path)
        if refs is None:  # not staged (a retry on the main thread): read through the store
            refs = chunks_of(self.ws.store, entry)
        mode = entry.mode & 0o7777
        anonymous = not self._existed(path)
        fd = -1
        tmp = ""
        if anonymous:
            try:
                fd = os.open(".", os.O_WRONLY | os.O_TMPFILE, mode, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno not in _NOT_SUPPORTED:
                    raise
                anonymous = False
        if not anonymous:
            self._guard(dir_fd, name, path)
            tmp = temp_name(name)
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd
            )
        try:
            self._fill(fd, refs, entry)
            if self._durable and entry.size >= EARLY_SYNC_BYTES:
                # The disk takes a large file while the other threads write on, not in the
                # final syncfs (which still runs, and alone decides durability).
                os.fdatasync(fd)
            if mode & ~self._umask != mode:
                os.fchmod(fd, mode)
            for key, value in entry.xattrs:
                with contextlib.suppress(OSError):
                    os.setxattr(fd, key, value)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
            if anonymous:
                try:
                    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, *_NOT_SUPPORTED):
                        raise
                    # Someone made the name meanwhile (or /proc is missing): go by a sibling.
                    self._guard(dir_fd, name, path)
                    tmp = temp_name(name)
                    os.link(f"/proc/self/fd/{fd}", tmp, dst_dir_fd=dir_fd, follow_symlinks=True)
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    tmp = ""
            else:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                tmp = ""
            if not entry.xattrs:
                st = os.fstat(fd)
                self.written[path] = (
                    *stat_facts(st),
                    int(entry.content_kind),
                    entry.content,
                    int(entry.flags),
                    entry.size,
                    (),
                )
        finally:
            os.close(fd)
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)

    def _fill(self, fd: int, refs: list[ChunkRef], entry: Entry) -> None:
        """Writes a file's chunks at their offsets; a hole is skipped (the file stays sparse)
        and the size is set at the end, so trailing holes are not written either."""
        offset = 0
        for ref in refs:
            if not is_hole(ref):
                pwrite_all(fd, self._read_any(ref.id), offset)
            offset += ref.length
        if offset != entry.size or (refs and is_hole(refs[-1])):
            os.ftruncate(fd, entry.size)

    def _read_any(self, object_id: bytes) -> bytes:
        if object_id in self._locations:
            try:
                return self._read(object_id)
            except _DamagedError as bad:
                raise bad.error from None
        return self.ws.store.read(object_id)

    def _set_meta(self, path: str, entry: Entry | None) -> None:
        assert entry is not None
        self._meta_done.add(path)
        if entry.kind is EntryKind.DIR and path in self._dir_cache:
            fd = self._dir_cache[path]
            if self._dir_modes.get(path) != entry.mode:
                os.fchmod(fd, entry.mode)
                self._dir_modes[path] = entry.mode
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
            return
        dir_fd, name = self._parent_fd(path, create=False)
        if entry.kind is EntryKind.SYMLINK:
            set_link_mtime(name, dir_fd, entry.mtime_ns)
            return
        flags = os.O_RDONLY | os.O_NOFOLLOW
        if entry.kind is EntryKind.DIR:
            flags |= os.O_DIRECTORY
        fd = os.open(name, flags, dir_fd=dir_fd)
        try:
            os.fchmod(fd, entry.mode)
            if entry.kind is EntryKind.FILE:
                current = set(os.listxattr(fd))
                wanted = {k.decode(): v for k, v in entry.xattrs}
                for key in current - set(wanted):
                    if key.startswith("user."):
                        with contextlib.suppress(OSError):
                            os.removexattr(fd, key)
                for key, value in wanted.items():
                    with contextlib.suppress(OSError):
                        os.setxattr(fd, key, value)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        finally:
            os.close(fd)


def _ids_of(group: list[tuple[int, list[bytes]]]) -> list[bytes]:
    return [object_id for _size, ids in group for object_id in ids]


def _bytes_of(group: list[tuple[int, list[bytes]]]) -> int:
    return sum(size for size, _ids in group)


def _placed_size(item: tuple[Action, int, str]) -> int:
    return action_size(item[0])
