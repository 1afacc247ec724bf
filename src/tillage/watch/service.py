"""The watcher of one workspace: inotify hints into a change log, and the loop that seals.

The change log answers `since(token)` for every seal in this process (registered with
watchstate) and, through the daemon's socket, for seals in other processes. Before answering,
a sync cookie is dropped into the store's run folder and awaited on the same inotify queue, so
every event the kernel queued before the question has been noted (watchman's cookies).

The seal loop sleeps on a condition: no events, no wake-ups, no disk writes, no seals.

The service belongs to the store it started in: a store deleted (or replaced by another at the
same path) stops it, through `on_gone`, before it seals into a store that is not its own.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tillage.core.changes import ChangeLog, Changes
from tillage.platform.names import random_hex
from tillage.watch.inotify import FolderWatcher
from tillage.watch.timing import RESCAN_INTERVAL, next_wake, seal_delay
from tillage.workspace import watchstate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COOKIE_TIMEOUT = 2.0  # seconds a since() waits for its cookie before it vouches for nothing


def store_identity(home: Path, workspace_id: str) -> tuple[int, int, int] | None:
    """What makes the store at `home` the one a watcher started in: the folder's device and
    inode, and the inode of the watch lock it holds there (None: no store, or no marker, as
    while `rm -rf` empties it). Another store made at the same path differs in both."""
    from tillage.store.marker import MARKER

    try:
        st = os.stat(home)
        lock = os.stat(watchstate.lock_path(home, workspace_id))
    except OSError:
        return None
    if not os.path.lexists(home / MARKER):
        return None
    return st.st_dev, st.st_ino, lock.st_ino


def _log(message: str) -> None:
    """One line in the daemon's log (its stderr); nothing is written while idle."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        sys.stderr.write(f"{stamp} {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class WatchService:
    """inotify watches, the change log and the seal loop of one attached workspace."""

    def __init__(
        self,
        home: Path,
        root: Path,
        workspace_id: str,
        *,
        debounce_ms: int,
        user_home: Path | None = None,
        on_mode: Callable[[], None] | None = None,
        max_watches: int | None = None,
        on_gone: Callable[[], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.home = home
        self.store = store_identity(home, workspace_id)
        self.root = root
        self.id = workspace_id
        self.debounce_ms = debounce_ms
        self.debounce = debounce_ms / 1000.0
        self.user_home = user_home
        self.on_mode = on_mode
        self.mode = "inotify"
        self.reason: str | None = None
        self.started_at = time.time()
        self.seals = 0  # snapshots the loop sealed (unchanged seals are not counted)
        self.seal_attempts = 0
        self.last_error: str | None = None
        self._cond = threading.Condition(threading.Lock())
        self._changes = ChangeLog(random_hex(8))
        self._first: float | None = None
        self._last: float | None = None
        self._rescan_at: float | None = None
        self._stopping = False
        self._sealing = False
        self._dropping = False  # test-only: events read are discarded (a simulated overflow)
        self._cookie_cond = threading.Condition(threading.Lock())
        self._cookies_seen: set[str] = set()
        self._cookie_seq = itertools.count(1)
        self.cookie_dir = watchstate.cookie_dir(home, workspace_id)
        store = home.resolve()
        skip = frozenset({str(store)}) if root in store.parents or root == store else frozenset()
        self.watcher = FolderWatcher(
            root,
            skip_dirs=skip,
            cookie_dir=self.cookie_dir,
            on_change=self._changed,
            on_lost=self._lost,
            on_degraded=self._degraded,
            on_cookie=self._cookie,
            on_batch=lambda: None,
            max_watches=max_watches,
            on_gone=on_gone,
            store_dir=home,
            on_store_event=self._store_changed,
            on_progress=on_progress,
        )
        self.on_gone = on_gone
        self._loop: threading.Thread | None = None

    # -- the change log -------------------------------------------------------------------

    def _mark_pending(self) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = now
            self._cond.notify_all()  # only the idle-to-pending edge wakes the loop
        self._last = now

    def _changed(self, folder: str, name: str | None) -> None:
        with self._cond:
            if self._dropping:
                return
            self._changes.note(folder, name)
            self._mark_pending()

    def _lost(self, reason: str) -> None:
        _log(f"lost track ({reason}): the next seal walks the whole folder")
        with self._cond:
            self._changes.lose()
            self._mark_pending()
            degraded = self.watcher.degraded
            changed = (self.mode == "rescan") != (degraded is not None)
            if degraded is None and self.mode == "rescan":
                self.mode, self.reason, self._rescan_at = "inotify", None, None
        if changed and self.on_mode is not None:
            self.on_mode()

    def _degraded(self, reason: str) -> None:
        _log(f"falling back to periodic rescans: {reason}")
        with self._cond:
            self.mode, self.reason = "rescan", reason
            self._rescan_at = time.monotonic() + RESCAN_INTERVAL
            self._cond.notify_all()
        if self.on_mode is not None:
            self.on_mode()

    def _cookie(self, name: str) -> None:
        with self._cookie_cond:
            self._cookies_seen.add(name)
            self._cookie_cond.notify_all()

    def store_gone(self) -> bool:
        """Tells whether the store this service started in is gone (deleted, moved, or
        another one made at its path)."""
        return self.store is None or store_identity(self.home, self.id) != self.store

    def _store_changed(self) -> None:
        """An entry of the store folder went away: if the store is going, the watcher stops."""
        if self.store_gone():
            self._gone_store()

    def _gone_store(self) -> None:
        with self._cond:
            if not self._stopping:
                _log(f"the store {self.home} is gone (deleted, moved or made anew): stopping")
            self._stopping = True
            self._cond.notify_all()
        if self.on_gone is not None:
            self.on_gone()

    def sync(self) -> bool:
        """Waits until every event queued before this call has been noted (a cookie file's
        own event has come through the same queue); False on timeout."""
        name = f"{os.getpid()}-{next(self._cookie_seq)}"
        path = self.cookie_dir / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
        deadline = time.monotonic() + COOKIE_TIMEOUT
        try:
            with self._cookie_cond:
                while name not in self._cookies_seen:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cookie_cond.wait(left)
                self._cookies_seen.discard(name)
                return True
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def token(self) -> str:
        with self._cond:
            return self._changes.token()

    def since(self, token: str | None) -> Changes:
        """What changed since `token` (None: the watcher cannot vouch; walk everything). In
        rescan mode the answer is always "walk everything": no cookie is needed for it."""
        with self._cond:
            if self.mode == "rescan":
                return Changes(self._changes.token(), None)
        synced = self.sync()
        with self._cond:
            if not synced:
                self._changes.lose()
            answer = self._changes.since(token)
            if self.mode == "rescan":
                return Changes(answer.token, None)
            return answer

    # -- the seal loop --------------------------------------------------------------------

    def start(self) -> None:
        """Watches the folder, registers the change log for in-process seals, starts sealing."""
        os.makedirs(self.cookie_dir, mode=0o700, exist_ok=True)
        for stale in os.listdir(self.cookie_dir):
            with contextlib.suppress(OSError):
                os.unlink(self.cookie_dir / stale)
        self.watcher.start()
        watchstate.register_local(self.id, self)
        self._loop = threading.Thread(
            target=self._loop_or_stop, name="tillage-seal-loop", daemon=True
        )
        self._loop.start()

    def stop(self, *, final_seal: bool = True) -> None:
        """Stops sealing (sealing what is pending first, when asked) and stops watching."""
        with self._cond:
            self._stopping = True
            pending = self._first is not None
            self._cond.notify_all()
        if self._loop is not None:
            self._loop.join(timeout=120)
        self.watcher.stop()
        if final_seal and pending:
            self._seal_once()
        watchstate.register_local(self.id, None)

    def _loop_or_stop(self) -> None:
        """The seal loop; if it ever fails, the watcher stops rather than say it watches while
        nothing seals (status then reports watching: false, truthfully)."""
        try:
            self._run()
        except Exception as exc:
            _log(f"the seal loop failed ({type(exc).__name__}: {exc}): stopping")
            if self.on_gone is not None:
                self.on_gone()
            raise

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    delay = seal_delay(now, self._first, self._last, self.debounce)
                    due, sleep = next_wake(now, delay, self._rescan_at)
                    if due:
                        break
                    self._cond.wait(sleep)
                self._first = self._last = None
                if self._rescan_at is not None:
                    self._rescan_at = time.monotonic() + RESCAN_INTERVAL
                self._sealing = True
            try:
                self._seal_once()
            finally:
                with self._cond:
                    self._sealing = False
                    self._cond.notify_all()

    def _seal_once(self) -> None:
        """One seal through the normal path (the workspace lock serialises it with the CLI);
        an unchanged folder publishes nothing."""
        from tillage.errors import BusyError
        from tillage.features.after_write import after_write
        from tillage.workspace.attach import require_workspace
        from tillage.workspace.recovery import recover_if_interrupted
        from tillage.workspace.seal import SealOptions, seal

        if self.store_gone():
            self._gone_store()  # never seal into a store that is not the one it started in
            return
        self.seal_attempts += 1
        try:
            # Never the one to put a removed pointer back: this runs on every quiet moment,
            # also while the folder is being deleted (see find_workspace).
            ws = require_workspace(self.home, self.root, self.user_home, restore_pointer=False)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            _log(f"cannot open the workspace: {self.last_error}")
            return
        try:
            recover_if_interrupted(ws)
            head = ws.store.head(ws.id)
            row = seal(ws, SealOptions(trigger="watch", skip_unchanged=True))
            if head is None or row.id != head.id:
                self.seals += 1
                after_write(ws.store, ws.id)
            self.last_error = None
        except BusyError:
            with self._cond:
                self._mark_pending()  # someone else is writing: try again after the debounce
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            _log(f"seal failed: {self.last_error}")
            with self._cond:
                self._changes.lose()
        finally:
            ws.store.close()

    # -- what ping and status say -----------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The watcher's state for `tillage.ping` and the info file."""
        watches = self.watcher.watch_count()  # before _cond: the reader takes them in that order
        unwatched = self.watcher.unwatched()
        with self._cond:
            return {
                "workspace": str(self.root),
                "id": self.id,
                "pid": os.getpid(),
                "mode": self.mode,
                "reason": self.reason,
                "token": self._changes.token(),
                "debounce_ms": self.debounce_ms,
                "started_at": _rfc3339(self.started_at),
                "watches": watches,
                "unwatched": unwatched,
                "released": self.watcher.released,
                "rescan_every_s": RESCAN_INTERVAL if self.mode == "rescan" else None,
                "seals": self.seals,
                "seal_attempts": self.seal_attempts,
                "pending": self._first is not None or self._sealing,
                "last_error": self.last_error,
            }

    def simulate_overflow(self, dropping: bool) -> None:
        """Test-only: while `dropping`, events read are discarded; turning it off reports an
        overflowed queue, exactly as IN_Q_OVERFLOW would."""
        with self._cond:
            self._dropping = dropping
        if not dropping:
            self._lost("the inotify event queue overflowed (simulated)")


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
