"""Rewinding a folder to a snapshot: plan, then apply (seal first, intent, atomic writes).

Apply is the crash-safety argument for the folder (INV-7): the present is sealed first (its ID is
returned as `undo`); every file to put back is written into a staging folder under `.tillage/`
first, each object verified as it is read, so a damaged store fails before the folder is
touched; then an intent record is written, files are renamed into place, and the intent is
removed last. A rewind killed half-way is rolled forward by the next command (recovery.py).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from tillage.core.models import Change, ContentKind, Entry, EntryFlag, EntryKind
from tillage.core.paths import CONTROL_DIR, parse
from tillage.core.rewind_plan import Action, Op, plan_actions
from tillage.errors import TillageError
from tillage.platform import clock, failpoints
from tillage.platform.fs import (
    atomic_write,
    open_subdir_nofollow,
    raise_if_disk_full,
    temp_name,
)
from tillage.platform.names import random_hex
from tillage.store.store import SnapshotRow
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace
from tillage.workspace.capture import is_racy, store_content
from tillage.workspace.errors import RewindStoppedError
from tillage.workspace.pathindex import Row
from tillage.workspace.recovery import intent_path
from tillage.workspace.seal import (
    SealOptions,
    publish_tree,
    scan_live,
    seal_locked,
    workspace_lock,
)
from tillage.workspace.sqlite_image import SIDECAR_SUFFIXES
from tillage.workspace.trees import chunks_of, flatten, write_manifest


@dataclass(frozen=True)
class RewindOutcome:
    target: SnapshotRow
    changes: tuple[Change, ...]
    applied: bool
    undo: str | None
    rescued: tuple[str, ...] = ()
    rescue: str | None = None


def normalize_scopes(paths: tuple[str, ...] | None) -> list[str] | None:
    """Parses --paths; None means the whole workspace."""
    if not paths:
        return None
    return sorted({parse(p) for p in paths})


def preview(ws: Workspace, target: SnapshotRow, scopes: list[str] | None) -> RewindOutcome:
    """Returns what a rewind would change, touching nothing (`--dry-run`)."""
    live = scan_live(ws).manifest or {}
    want = flatten(ws.store, bytes.fromhex(target.tree))
    planned = plan_actions(live, want, scopes)
    return RewindOutcome(target, planned.changes, applied=False, undo=None)


def apply(ws: Workspace, target: SnapshotRow, scopes: list[str] | None) -> RewindOutcome:
    """Rewinds the folder to `target` within `scopes`, sealing the present first."""
    with workspace_lock(ws):
        _remove_staging(ws.root)  # left by a rewind killed before its intent: never applied
        current: dict[str, Entry] = {}
        undo = seal_locked(
            ws,
            SealOptions(trigger="pre_rewind", label=f"before rewind to {target.id[:12]}"),
            manifest_out=current,
        )
        want = flatten(ws.store, bytes.fromhex(target.tree))
        planned = plan_actions(current, want, scopes)
        applier = Applier(ws, current)
        applier.stage(planned.actions)  # a damaged store fails here, the folder untouched
        intent = {
            "op": "rewind",
            "workspace": ws.id,
            "target": target.id,
            "undo": undo.id,
            "scopes": scopes,
            "started_ns": clock.now_ns(),
            "pid": os.getpid(),
        }
        atomic_write(intent_path(ws), json.dumps(intent).encode())
        failpoints.hit("rewind.after_intent")
        try:
            applier.run(planned.actions)
        except (OSError, TillageError) as exc:
            # Not a crash: this process is alive to say what happened. Leaving the intent would
            # make every later command retry the same failure, so the caller gets the undo.
            intent_path(ws).unlink()
            err = _stopped(exc, undo.id)
            if applier.rescued:
                with contextlib.suppress(OSError, TillageError):
                    err.details["rescue"] = applier.publish_rescue(undo)
            if err is exc:
                raise
            raise err from exc
        rescue = applier.publish_rescue(undo) if applier.rescued else None
        failpoints.hit("rewind.before_intent_removed")
        intent_path(ws).unlink()
        remember_written(ws, applier.written)
    return RewindOutcome(
        target,
        planned.changes,
        applied=True,
        undo=undo.id,
        rescued=tuple(sorted(applier.rescued)),
        rescue=rescue,
    )


def remember_written(ws: Workspace, written: dict[str, Row]) -> None:
    """Puts what a rewind wrote into the path index (INV-8: files written within the racy
    window are remembered with facts that never match), so the next seal skips reading it."""
    if not written:
        return
    index = pathindex.load(ws.store, ws.id)
    now = clock.now_ns()
    for path, row in written.items():
        index.files[path] = (row[0], -1, *row[2:]) if is_racy(row[1], row[2], now) else row
    pathindex.save(ws.store, ws.id, index)


def _stopped(exc: OSError | TillageError, undo: str) -> TillageError:
    """Turns a failure part-way through a rewind into a public error that names the way back."""
    next_step = (
        "fix the cause and rewind again; to go back to how the folder was before, "
        f"run `till rewind {undo} --yes`"
    )
    if isinstance(exc, TillageError):
        exc.message = f"the rewind stopped part-way: {exc.message}"
        exc.next = next_step
        exc.details["undo"] = undo
        return exc
    return RewindStoppedError(
        f"the rewind stopped part-way: {exc.strerror}: {exc.filename}",
        next_step=next_step,
        details={"undo": undo},
    )


def finish_interrupted(
    ws: Workspace, target: SnapshotRow, scopes: list[str] | None, undo: str
) -> None:
    """Rolls an interrupted rewind forward: re-plans against the folder as it is and applies.

    The folder is sealed again first: whatever was written into it after the crash is kept in
    that snapshot, and the interrupted rewind's own `undo` still holds the state before it.
    The caller holds the workspace lock.
    """
    _remove_temp_files(ws.root)
    try:
        live: dict[str, Entry] = {}
        seal_locked(
            ws,
            SealOptions(
                trigger="pre_rewind", label=f"before finishing a rewind (undo {undo[:12]})"
            ),
            manifest_out=live,
        )
        want = flatten(ws.store, bytes.fromhex(target.tree))
        planned = plan_actions(live, want, scopes)
        applier = Applier(ws, live)
        applier.stage(planned.actions)
        applier.run(planned.actions)
    except (OSError, TillageError) as exc:
        intent_path(ws).unlink()
        err = _stopped(exc, undo)
        if err is exc:
            raise
        raise err from exc
    intent_path(ws).unlink()


def _remove_staging(root: Path) -> None:
    control = root / CONTROL_DIR
    if control.is_dir() and not control.is_symlink():
        for leftover in control.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _remove_temp_files(root: Path) -> None:
    """Removes temporary siblings and staging folders an interrupted rewind left behind."""
    _remove_staging(root)
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root) and ".tillage" in dirnames:
            dirnames.remove(".tillage")
        for name in filenames:
            if ".tillage-tmp-" in name:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(dirpath, name))


STAGING_PREFIX = "staging-"


class Applier:
    """Executes rewind actions below the root without ever following a symlinked parent."""

    def __init__(self, ws: Workspace, expected: dict[str, Entry] | None) -> None:
        self.ws = ws
        self.expected = expected
        self.rescued: dict[str, Entry] = {}
        self._root_fd = os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY)
        self._dir_cache: dict[str, int] = {}
        self._writer = ws.store.writer()
        self._control_fd = -1
        self._staging_name = ""
        self._staging_fd = -1
        self._staged: dict[str, str] = {}
        # What was written, as path-index rows, so the next seal need not read it again.
        self.written: dict[str, Row] = {}

    def stage(self, actions: tuple[Action, ...]) -> None:
        """Writes every file the actions put back into `.tillage/staging-*`, with its metadata.

        Each object is verified as it is read (INV-4), so a damaged store raises here, before
        anything in the folder changes; on any failure the staging folder is removed.
        """
        try:
            self._control_fd = open_subdir_nofollow(self._root_fd, CONTROL_DIR, create=True)
            self._staging_name = f"{STAGING_PREFIX}{random_hex(6)}"
            os.mkdir(self._staging_name, 0o700, dir_fd=self._control_fd)
            self._staging_fd = os.open(
                self._staging_name,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                dir_fd=self._control_fd,
            )
            for n, action in enumerate(actions):
                entry = action.entry
                if action.op is Op.WRITE and entry is not None and entry.kind is EntryKind.FILE:
                    self._write_content(self._staging_fd, str(n), entry)
                    self._staged[action.path] = str(n)
            failpoints.hit("rewind.after_staging")
        except BaseException as exc:
            self._close()
            if isinstance(exc, OSError):
                raise_if_disk_full(exc)
            raise

    def run(self, actions: tuple[Action, ...]) -> None:
        try:
            for n, action in enumerate(actions):
                self._do(action)
                if n == 0:
                    failpoints.hit("rewind.after_first_action")
        finally:
            try:
                self._writer.commit()  # rescued bytes are durable however the run ended
            finally:
                self._close()

    def _close(self) -> None:
        for fd in self._dir_cache.values():
            os.close(fd)
        self._dir_cache.clear()
        if self._staging_fd >= 0:
            os.close(self._staging_fd)
            self._staging_fd = -1
        if self._control_fd >= 0:
            if self._staging_name:
                with contextlib.suppress(OSError):
                    shutil.rmtree(self._staging_name, dir_fd=self._control_fd)
            os.close(self._control_fd)
            self._control_fd = -1
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1
        self._writer.close()

    def _write_content(self, dir_fd: int, name: str, entry: Entry) -> None:
        """Creates `name` below `dir_fd` with the entry's bytes, mode, xattrs and mtime."""
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd
        )
        try:
            for ref in chunks_of(self.ws.store, entry):
                data = memoryview(self.ws.store.read(ref.id))
                while data:
                    data = data[os.write(fd, data) :]
            os.fchmod(fd, entry.mode)
            for key, value in entry.xattrs:
                with contextlib.suppress(OSError):
                    os.setxattr(fd, key, value)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
            raise
        os.close(fd)

    def _copy_staged(self, staged: str, dir_fd: int, tmp: str) -> None:
        """Copies a staged file next to its final name, when a rename cannot cross file systems."""
        src = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self._staging_fd)
        try:
            st = os.fstat(src)
            dst = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                stat.S_IMODE(st.st_mode),
                dir_fd=dir_fd,
            )
            try:
                while os.sendfile(dst, src, None, 1 << 30):
                    pass
                for key in os.listxattr(src):
                    with contextlib.suppress(OSError):
                        os.setxattr(dst, key, os.getxattr(src, key))
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(dst)
        finally:
            os.close(src)

    def _dir(self, path: str, *, create: bool) -> int:
        """Returns the fd of workspace folder `path` ('' is the root), opened one level at a
        time from its parent's fd so no symlink is ever followed; fds are cached."""
        if not path:
            return self._root_fd
        fd = self._dir_cache.get(path)
        if fd is None:
            parent, _, name = path.rpartition("/")
            fd = open_subdir_nofollow(self._dir(parent, create=create), name, create=create)
            self._dir_cache[path] = fd
        return fd

    def _parent_fd(self, path: str, *, create: bool) -> tuple[int, str]:
        parent, _, name = path.rpartition("/")
        return self._dir(parent, create=create), name

    def _invalidate(self, path: str) -> None:
        for key in [k for k in self._dir_cache if k == path or k.startswith(path + "/")]:
            os.close(self._dir_cache.pop(key))

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
        """Rescues a file a concurrent writer changed since the pre-rewind seal."""
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
            kind, content, size = store_content(fd, self._writer)
        finally:
            os.close(fd)
        self.rescued[path] = Entry(
            path.rsplit("/", 1)[-1].encode("utf-8", "surrogateescape"),
            EntryKind.FILE,
            stat.S_IMODE(st.st_mode),
            size,
            st.st_mtime_ns,
            ContentKind(kind),
            content,
        )

    def publish_rescue(self, undo: SnapshotRow) -> str:
        """Seals the pre-rewind state with the rescued bytes in place; returns its ID."""
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
                    trigger="pre_rewind", label=f"rescued during rewind (undo {undo.id[:12]})"
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
        if stat.S_ISDIR(st.st_mode):
            self._invalidate(path)
            shutil.rmtree(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)

    def _make_dir(self, path: str, entry: Entry | None) -> None:
        assert entry is not None
        dir_fd, name = self._parent_fd(path, create=True)
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dir_fd)
                os.mkdir(name, 0o700, dir_fd=dir_fd)

    def _write(self, path: str, entry: Entry | None) -> None:
        assert entry is not None
        dir_fd, name = self._parent_fd(path, create=True)
        self._guard(dir_fd, name, path)
        staged = self._staged.get(path)
        try:
            if staged is not None:
                self._replace_with_staged(staged, dir_fd, name)
            else:
                self._replace_with_new(entry, dir_fd, name)
        except OSError as exc:
            if exc.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise
            self._invalidate(path)  # a folder is in the way: it was sealed, so remove it
            shutil.rmtree(name, dir_fd=dir_fd)
            return self._write(path, entry)
        self._staged.pop(path, None)
        if entry.flags & EntryFlag.SQLITE_IMAGE:
            for suffix in SIDECAR_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name + suffix, dir_fd=dir_fd)
        if entry.kind is EntryKind.FILE and not entry.xattrs:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            self.written[path] = (
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
                st.st_dev,
                st.st_mode,
                "",
                int(entry.content_kind),
                entry.content,
                int(entry.flags),
                entry.size,
                (),
            )
        return None

    def _replace_with_staged(self, staged: str, dir_fd: int, name: str) -> None:
        """Renames the staged file over `name` in one step (INV-1), or copies it when the
        workspace spans file systems."""
        try:
            os.replace(staged, name, src_dir_fd=self._staging_fd, dst_dir_fd=dir_fd)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        tmp = temp_name(name)
        self._copy_staged(staged, dir_fd, tmp)
        self._replace_tmp(tmp, dir_fd, name)

    def _replace_with_new(self, entry: Entry, dir_fd: int, name: str) -> None:
        tmp = temp_name(name)
        if entry.kind is EntryKind.SYMLINK:
            os.symlink(entry.content, tmp, dir_fd=dir_fd)
            os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=dir_fd, follow_symlinks=False)
        else:
            self._write_content(dir_fd, tmp, entry)
        self._replace_tmp(tmp, dir_fd, name)

    def _replace_tmp(self, tmp: str, dir_fd: int, name: str) -> None:
        try:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise

    def _set_meta(self, path: str, entry: Entry | None) -> None:
        assert entry is not None
        dir_fd, name = self._parent_fd(path, create=False)
        if entry.kind is EntryKind.SYMLINK:
            os.utime(
                name, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=dir_fd, follow_symlinks=False
            )
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
