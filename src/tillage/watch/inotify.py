"""inotify as hints: which workspace folders had their listing or entries change.

One non-recursive watch per folder, managed here (watchdog's recursive observer cannot prune),
through watchdog's ctypes bindings to inotify. The walk prunes what the workspace policy
excludes, `.tillage/` and the store when it lies inside the workspace, so churn there costs
nothing. Every event becomes "folder F changed" for the change log; a new folder gets watches
for its whole subtree (added first, then listed, so nothing created meanwhile is missed), and
every folder in it is noted. A lost event queue, a watch that could not be added, or a changed
`.tillagepolicy` is reported to `on_lost`: the next seal walks everything.

Beyond inotify's watch limit (ENOSPC, fs.inotify.max_user_watches) the watcher degrades to
periodic rescans and gives back every watch but the workspace folder's own and the cookie
folder's: watches it cannot use for a delta walk would only starve the user's editors and other
watchers of the same limit. A policy change tries the whole tree again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from watchdog.observers import inotify_c

from tillage.core.paths import CONTROL_DIR
from tillage.watch.watchmap import WatchMap
from tillage.workspace.policy import POLICY_FILE, Policy

# watchdog warns noisily (a huge repr) when its callbacks race (LIBRARIES.md); we use only its
# bindings, but a daemon's log must never fill with that.
warnings.filterwarnings("ignore", category=RuntimeWarning, module="watchdog")

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

FOLDER_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
COOKIE_MASK = IN_CREATE | IN_ONLYDIR | IN_DONT_FOLLOW
# The store folder: an entry of it deleted or moved away may be the store going (`rm -rf`
# empties it first; the folder's own deletion is told only once no file in it is open, and the
# daemon's log and lock are).
STORE_MASK = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW
BUFFER = 64 * 1024
# How long the reader lets events gather after a read. Waking for every few events cost a
# watched full rewind of the standard workload 0.1 s of sys time and 0.12 s of wall (1.60
# against 1.48 s, medians of 6 paired runs); an event after a quiet spell is read at once.
BURST_PAUSE = 0.005
# The limit is the lowest of the system's and those of the user namespaces the process is in.
WATCH_LIMITS = (
    Path("/proc/sys/fs/inotify/max_user_watches"),
    Path("/proc/sys/user/max_inotify_watches"),
)


class WatchLimitError(Exception):
    """inotify's watch limit (max_user_watches) is exhausted."""


def add_watch(fd: int, path: bytes, mask: int) -> int:
    """inotify_add_watch(2): the watch descriptor, or -1 when the folder cannot be watched
    (gone, not a folder, unreadable). Raises WatchLimitError when inotify's limits are
    reached, however the bindings tell it (-1 with errno, or a raised OSError)."""
    import ctypes

    wd: int
    try:
        wd = int(inotify_c.inotify_add_watch(fd, path, mask))
        err = ctypes.get_errno() if wd < 0 else 0
    except OSError as exc:
        wd, err = -1, exc.errno or 0
    if wd >= 0:
        return wd
    if err == errno.ENOSPC:
        raise WatchLimitError(
            f"the tree has more folders than inotify allows to watch ({_limit_now()})"
        )
    if err == errno.EMFILE:
        raise WatchLimitError("inotify's instance limit is reached")
    return -1


def _limit_now() -> str:
    """The watch limit as a phrase: "fs.inotify.max_user_watches, 8192 here"."""
    limits = []
    for path in WATCH_LIMITS:
        with contextlib.suppress(OSError, ValueError):
            limits.append(int(path.read_text()))
    here = f", {min(limits)} here" if limits else ""
    return f"fs.inotify.max_user_watches{here}"


class FolderWatcher:
    """Per-folder inotify watches over one workspace, reporting changed folders.

    Callbacks run on the reader thread: `on_change(rel_dir, name)` (name None: the folder
    changed in ways not told by name), `on_lost(reason)` (events may
    have been missed), `on_degraded(reason)` (watches cannot cover the tree: fall back to
    periodic rescans), `on_cookie(name)` (a sync cookie arrived), `on_batch()` after every read,
    `on_gone()` (the workspace folder itself was deleted or moved away), `on_store_event()`
    (an entry of the store folder `store_dir`, or the folder, was deleted or moved: the store
    may be going), `on_progress(watches)` while the walks add watches.
    """

    def __init__(
        self,
        root: Path,
        *,
        skip_dirs: frozenset[str],
        cookie_dir: Path,
        on_change: Callable[[str, str | None], None],
        on_lost: Callable[[str], None],
        on_degraded: Callable[[str], None],
        on_cookie: Callable[[str], None],
        on_batch: Callable[[], None],
        max_watches: int | None = None,
        on_gone: Callable[[], None] | None = None,
        store_dir: Path | None = None,
        on_store_event: Callable[[], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.root = root
        self.store_dir = store_dir
        self.on_store_event = on_store_event
        self.on_progress = on_progress
        # The workspace folder itself was deleted or moved: nothing is left to watch here.
        self.on_gone = on_gone
        self.max_watches = max_watches  # a test's stand-in for fs.inotify.max_user_watches
        self.skip_dirs = skip_dirs  # absolute paths never watched (the store inside the root)
        self.cookie_dir = cookie_dir
        self.on_change = on_change
        self.on_lost = on_lost
        self.on_degraded = on_degraded
        self.on_cookie = on_cookie
        self.on_batch = on_batch
        self.policy = Policy.load(root)
        self.degraded: str | None = None
        self.released = 0  # watches given back when it degraded
        self._fd = inotify_c.inotify_init()
        if self._fd < 0:
            raise OSError(errno.EMFILE, "cannot create an inotify instance")
        os.set_inheritable(self._fd, False)
        self._wake_r, self._wake_w = os.pipe()
        self._watches = WatchMap()
        self._cookie_wd = -1
        self._store_wd = -1
        self._lock = threading.RLock()  # guards the maps: the reader and a policy reload
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- watches --------------------------------------------------------------------------

    def _abs(self, rel: str) -> Path:
        return self.root / rel if rel else self.root

    def _excluded(self, rel: str, is_dir: bool) -> bool:
        if rel == CONTROL_DIR:
            return True
        if is_dir and str(self._abs(rel)) in self.skip_dirs:
            return True
        return self.policy.excludes(rel, is_dir)

    def _nested(self, rel: str) -> bool:
        """Tells whether folder `rel` is another workspace nested in this one (its own
        `.tillage/`, workspace/nested.py): its events are not this workspace's."""
        try:
            st = os.lstat(self._abs(rel) / CONTROL_DIR)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode)

    def _add(self, rel: str) -> bool:
        """Adds a watch on folder `rel`; False when it is gone or unreadable."""
        if (
            self.max_watches is not None
            and len(self._watches) >= self.max_watches
            and rel not in self._watches
        ):
            raise WatchLimitError(
                f"the tree has more folders than inotify allows to watch ({self.max_watches})"
            )
        path = os.fsencode(str(self._abs(rel)))
        wd = add_watch(self._fd, path, FOLDER_MASK)
        if wd < 0:
            return False  # gone, not a folder, or unreadable: the seal's walk reports it
        self._watches.add(rel, wd)
        return True

    def add_tree(self, rel: str, *, note: bool) -> None:
        """Watches folder `rel` and everything below it that is not excluded; with `note`,
        reports every folder in it as changed (a folder that just appeared). A degraded watcher
        adds none but the workspace folder's own: the periodic rescan covers the rest."""
        if self.degraded is not None:
            if rel == "":
                with contextlib.suppress(WatchLimitError):
                    self._add("")
            elif note:
                self.on_change(rel, None)
            return
        stack = [rel]
        while stack:
            current = stack.pop()
            if current and self._nested(current):
                continue  # another workspace: not watched from here
            try:
                if not self._add(current):
                    continue
            except WatchLimitError as exc:
                self._degrade(f"{exc}; {len(self._watches)} folders were watched then")
                return
            if self.on_progress is not None:
                self.on_progress(len(self._watches))
            if note:
                self.on_change(current, None)
            try:
                entries = list(os.scandir(self._abs(current)))
            except OSError:
                continue
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if not is_dir:
                    continue
                child = f"{current}/{entry.name}" if current else entry.name
                if not self._excluded(child, True):
                    stack.append(child)

    def _drop_tree(self, rel: str) -> None:
        """Forgets (and removes) the watches on `rel` and below: it moved or went away."""
        for wd in self._watches.forget_tree(rel):
            inotify_c.inotify_rm_watch(self._fd, inotify_c.WatchDescriptor(wd))

    def _degrade(self, reason: str) -> None:
        if self.degraded is None:
            self.degraded = reason
            self.released = self._release()
            self.on_degraded(reason)
        self.on_lost(reason)

    def _release(self) -> int:
        """Gives back every watch but the workspace folder's own; returns how many."""
        gone = self._watches.forget_all_but_root()
        for wd in gone:
            inotify_c.inotify_rm_watch(self._fd, inotify_c.WatchDescriptor(wd))
        return len(gone)

    def unwatched(self) -> str | None:
        """Which folders have no watch, and what covers them; None when every one has one."""
        if self.degraded is None:
            return None
        kept = "the workspace folder itself" if "" in self._watches else "no folder"
        return f"every folder but {kept}"

    def watch_count(self) -> int:
        with self._lock:
            return len(self._watches)

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Watches the cookie folder, the store folder and the tree, then reads events on a
        thread. The tree comes last: beyond the watch limit it leaves none for the others."""
        with self._lock:
            self._watch_cookies()
            self._watch_store()
            self.add_tree("", note=False)
        self._thread = threading.Thread(target=self._run, name="tillage-inotify", daemon=True)
        self._thread.start()

    def _watch_cookies(self) -> None:
        """Watches the cookie folder; without a watch left for it, the watcher degrades (a
        degraded watcher's answers need no cookie)."""
        if self._cookie_wd >= 0:
            return
        try:
            wd = add_watch(self._fd, os.fsencode(str(self.cookie_dir)), COOKIE_MASK)
        except WatchLimitError as exc:
            self._degrade(f"{exc}; no watch was left for the cookie folder")
            return
        if wd < 0:
            raise OSError(errno.ENOENT, f"cannot watch the cookie folder {self.cookie_dir}")
        self._cookie_wd = wd

    def _watch_store(self) -> None:
        """Watches the store folder, for its deletion or move; without a watch left for it,
        the watcher degrades (every seal looks at the store first, and rescans seal often)."""
        if self.store_dir is None or self._store_wd >= 0:
            return
        try:
            self._store_wd = add_watch(self._fd, os.fsencode(str(self.store_dir)), STORE_MASK)
        except WatchLimitError as exc:
            self._degrade(f"{exc}; no watch was left for the store folder")

    def stop(self) -> None:
        """Stops the reader thread and closes the inotify instance."""
        self._stopping = True
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in (self._fd, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def reload_policy(self) -> None:
        """Re-reads `.tillagepolicy` and re-prunes the watches: folders it now excludes lose
        theirs, folders it no longer excludes gain one. Every other folder keeps its watch
        (and its descriptor), so an event already queued for it is not lost."""
        with self._lock:
            self.policy = Policy.load(self.root)
            if self.degraded is not None:
                self._drop_tree("")  # start again: the tree may fit the limit now
                self.degraded = None
                self.released = 0
                with contextlib.suppress(OSError):
                    self._watch_cookies()
                self._watch_store()
            for rel in sorted(self._watches.rels()):
                if rel in self._watches and self._excluded_here_or_above(rel):
                    self._drop_tree(rel)
            self.add_tree("", note=False)

    def _excluded_here_or_above(self, rel: str) -> bool:
        parts = rel.split("/")
        return any(self._excluded("/".join(parts[: n + 1]), True) for n in range(len(parts)))

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stopping:
            try:
                ready = poller.poll()
            except InterruptedError:
                continue
            if self._stopping:
                return
            if not any(fd == self._fd for fd, _ in ready):
                continue
            try:
                buf = os.read(self._fd, BUFFER)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            events = list(inotify_c.InotifyFD._parse_event_buffer(buf))
            try:
                self.handle(events)
            except Exception as exc:  # a hint gone wrong must not end the watching
                self.on_lost(f"an event could not be handled ({type(exc).__name__}: {exc})")
            self.on_batch()
            if len(buf) < BUFFER // 2:
                # Whatever comes next (a burst: a rewind, a checkout, an install) gathers for
                # one read rather than waking this thread every few events; a backlog (a full
                # read) is read at once.
                time.sleep(BURST_PAUSE)

    # -- events ---------------------------------------------------------------------------

    def handle(self, events: Sequence[tuple[int, int, int, bytes]]) -> None:
        """Turns a batch of raw events (wd, mask, cookie, name) into changed folders."""
        reload = False
        with self._lock:
            for wd, mask, _cookie, raw_name in events:
                if mask & IN_Q_OVERFLOW:
                    self.on_lost("the inotify event queue overflowed")
                    continue
                if wd == self._store_wd:
                    if mask & IN_IGNORED:
                        self._store_wd = -1
                    elif self.on_store_event is not None:
                        self.on_store_event()
                    continue
                if wd == self._cookie_wd:
                    if reload:  # every change before the cookie is answered, a reload too
                        self._policy_changed()
                        reload = False
                    if mask & IN_CREATE:
                        self.on_cookie(os.fsdecode(raw_name))
                    continue
                if mask & IN_IGNORED:
                    continue
                folder = self._watches.folder(wd)
                if folder is None:
                    continue
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                    if folder == "":
                        self.on_lost("the workspace folder itself was moved or deleted")
                        if self.on_gone is not None:
                            self.on_gone()
                    # The parent's own event notes the parent; this folder's watch is gone.
                    if mask & IN_DELETE_SELF:
                        self._drop_tree(folder)
                    continue
                name = os.fsdecode(raw_name)
                if not name:
                    self.on_change(folder, None)  # the folder's own attributes: list it whole
                    continue
                rel = f"{folder}/{name}" if folder else name
                is_dir = bool(mask & IN_ISDIR)
                if folder == "" and name == POLICY_FILE:
                    reload = True
                if folder and name == CONTROL_DIR and is_dir and mask & (IN_CREATE | IN_MOVED_TO):
                    # The folder became a workspace of its own (a clone, `till watch` in it):
                    # no longer watched here; its parent is listed again, which leaves it out.
                    self._drop_tree(folder)
                    parent, _, child = folder.rpartition("/")
                    self.on_change(parent, child)
                    continue
                if self._excluded(rel, is_dir):
                    continue
                self.on_change(folder, name)
                if is_dir and mask & (IN_MOVED_FROM | IN_DELETE):
                    self._drop_tree(rel)  # its parent, noted above, no longer lists it
                elif is_dir and mask & (IN_CREATE | IN_MOVED_TO):
                    self._drop_tree(rel)
                    self.add_tree(rel, note=True)
            if reload:
                self._policy_changed()

    def _policy_changed(self) -> None:
        self.reload_policy()
        self.on_lost("the workspace policy (.tillagepolicy) changed")
