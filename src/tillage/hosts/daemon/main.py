"""The watcher daemon process: `python -m tillage.hosts.daemon --home H --root R`.

It takes the workspace's watch flock (held for its whole life: a crash frees it, so `status`
stays truthful), watches the folder, seals quiet moments and serves the socket, until SIGTERM,
SIGINT or SIGHUP; then it stops accepting calls, seals what is pending, removes its socket and
info file and lets the lock go. A daemon that finds the lock taken exits 0 at once: another
watcher already serves this workspace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

LOCK_RETRY = 0.5  # seconds: `status` holds the lock shared for microseconds when it checks it
LOG_LIMIT = 1 << 20  # a log larger than this is started afresh by the next daemon
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
PROGRESS_EVERY = 0.5  # seconds between the info file's reports while the first watches go in


def _parse(argv: list[str]) -> tuple[Path, Path, int, bool]:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tillage.hosts.daemon")
    parser.add_argument("--home", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--debounce-ms", type=int, default=500)
    parser.add_argument("--foreground", action="store_true")
    ns = parser.parse_args(argv)
    return Path(ns.home), Path(ns.root), max(0, ns.debounce_ms), bool(ns.foreground)


def _take_lock(path: Path) -> int | None:
    """The watch lock's descriptor, held; None when another watcher holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + LOCK_RETRY
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)


def _write_info(path: Path, doc: dict[str, object]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(doc).encode() + b"\n")
    os.replace(tmp, path)


def _starting_info(
    root: Path, workspace_id: str, debounce_ms: int, foreground: bool, watches: int
) -> dict[str, object]:
    """The info file while the daemon adds its first watches (it does not answer yet)."""
    return {
        "foreground": foreground,
        "workspace": str(root),
        "id": workspace_id,
        "pid": os.getpid(),
        "mode": "starting",
        "reason": None,
        "debounce_ms": debounce_ms,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "watches": watches,
    }


def _trim_log() -> None:
    """Starts a log that has grown large afresh (stderr is the log when detached)."""
    try:
        st = os.fstat(2)
        import stat

        if stat.S_ISREG(st.st_mode) and st.st_size > LOG_LIMIT:
            os.ftruncate(2, 0)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Runs the watcher until a stop signal; returns the exit status."""
    import warnings

    warnings.filterwarnings("ignore", category=RuntimeWarning, module="watchdog")
    stop = _stop_on_signals()
    home, root, debounce_ms, foreground = _parse(sys.argv[1:] if argv is None else argv)

    from tillage.errors import TillageError
    from tillage.workspace import watchstate
    from tillage.workspace.attach import require_workspace

    user_home = _user_home()
    try:
        ws = require_workspace(home, root, user_home, restore_pointer=False)
    except TillageError as err:
        sys.stderr.write(f"till watcher: {err.message} ({err.next})\n")
        return 1
    workspace_id, root = ws.id, ws.root
    ws.store.close()
    lock_fd = _take_lock(watchstate.lock_path(home, workspace_id))
    if lock_fd is None:
        if foreground:
            sys.stderr.write("till watcher: another watcher already runs for this folder\n")
            return 1
        return 0  # another watcher won the race: it serves this workspace
    try:
        return _serve(home, root, workspace_id, debounce_ms, foreground, user_home, stop)
    finally:
        os.close(lock_fd)  # the lock goes last: `status` says watching until all is cleaned


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM, SIGINT or SIGHUP (handlers run on the main thread, which only
    waits for it; the signal mask is left alone, so commands the daemon runs get the usual)."""
    stop = threading.Event()

    def handler(_signum: int, _frame: object) -> None:
        stop.set()

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    return stop


def _user_home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:
        return None


# What the calls an agent repeats import on their first run; loaded once the watcher serves,
# so the first `till snap` after `till watch` costs what the later ones do (about 40 ms less).
WARM_MODULES = (
    "tillage.hosts.cli.main",
    "tillage.hosts.cli.human",
    "tillage.verbs.wire",
    "tillage.verbs.oplog_record",
    "tillage.workspace.seal",
    "tillage.workspace.rewind",
    "tillage.features.after_write",
    "tillage.features.hooks.hooks",
    "tillage.features.lifecycle.budget",
    "tillage.features.radar.radar",
    "tillage.core.rewind_plan",
    "tillage.core.treediff",
    "tillage.store.events",
    "pyfastcdc",  # a large file's chunking (11 ms of the first seal that cut one)
)
# How long the warm-up waits for the folder's first snapshot: `till watch` starts the watcher
# before its seal, so that on a new folder there is no head to read yet (a million files take
# minutes to seal).
FIRST_HEAD_WAIT_S = 3600.0
FIRST_HEAD_POLL_S = 0.25


def _warm_up(home: Path, root: Path, user_home: Path | None, stop: threading.Event) -> None:
    """Imports what the first calls will need, and every verb module, off the serving path;
    then reads the head snapshot's trees into the tree cache, so the first seal told which
    names changed need not read them from the store (on a new folder, once `till watch` has
    sealed it: the first `till snap` after it read 111 trees from the store, 17 ms)."""
    import importlib

    from tillage.verbs.registry import all_verbs

    # glibc hands out large buffers as fresh mappings (a page fault per 4 KiB on first touch)
    # until one of that size is freed, then raises its threshold and serves them from the
    # heap: free one now, so the first seal's chunk reads do not pay ~20 ms of page faults.
    del_me = bytearray(8 << 20)
    del del_me
    # ... and touch the heap those buffers will come from, which it keeps once grown.
    heap = [bytearray(1 << 20) for _ in range(8)]
    del heap
    all_verbs()
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from tillage.errors import TillageError
    from tillage.workspace.attach import require_workspace
    from tillage.workspace.trees import TREES, cache_trees

    def cache_head() -> bool:
        """Caches the head's trees; False when the folder has no snapshot yet."""
        ws = require_workspace(home, root, user_home, restore_pointer=False)
        try:
            head = ws.store.head(ws.id)
            if head is not None:
                cache_trees(ws.store, bytes.fromhex(head.tree), TREES)
            return head is not None
        finally:
            ws.store.close()

    # The store is opened only when its publication log changed, and closed at once: a
    # connection held while `till watch` seals would keep that seal's index in the WAL file
    # after it exits (1.7 MB beside a 1.2 MB index on the standard workload), until this one
    # closed.
    log = home / "log" / "publication.log"
    seen: tuple[int, int] | None = (-1, -1)
    waited = 0.0
    with contextlib.suppress(OSError, TillageError):
        while True:
            mark = _stat_mark(log)
            if mark != seen:
                seen = mark
                if cache_head():
                    return
            if waited >= FIRST_HEAD_WAIT_S or stop.wait(FIRST_HEAD_POLL_S):
                return
            waited += FIRST_HEAD_POLL_S


def _stat_mark(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def _serve(
    home: Path,
    root: Path,
    workspace_id: str,
    debounce_ms: int,
    foreground: bool,
    user_home: Path | None,
    stop: threading.Event,
) -> int:
    from tillage.hosts.daemon.server import Server
    from tillage.watch.service import WatchService
    from tillage.workspace import watchstate

    if not foreground:
        _trim_log()
    watchstate.ensure_run_dir(home)
    sock_path = watchstate.socket_path(home, workspace_id)
    info_path = watchstate.info_path(home, workspace_id)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_path)  # a crashed watcher's socket: we hold the lock, it is stale

    service: WatchService
    starting = True
    reported = 0.0

    def write_info() -> None:
        doc = service.describe()
        doc["foreground"] = foreground
        _write_info(info_path, doc)

    def progress(watches: int) -> None:
        """While the first watches go in (a minute for a huge tree on a busy machine), the
        info file says so: `till watch` waits as long as the count moves."""
        nonlocal reported
        if not starting:
            return
        now = time.monotonic()
        if slow or now - reported >= PROGRESS_EVERY:
            reported = now
            _write_info(
                info_path, _starting_info(root, workspace_id, debounce_ms, foreground, watches)
            )
        if slow:
            time.sleep(slow)  # test-only: a tree that takes long to watch

    from tillage.platform import clock

    clock.pin_process(clock.parse_pin(os.environ.get("TILLAGE_NOW")))  # as the CLI's seals
    debug = os.environ.get("TILLAGE_WATCH_DEBUG") == "1"
    limit = os.environ.get("TILLAGE_WATCH_MAX_WATCHES", "") if debug else ""
    slow_ms = os.environ.get("TILLAGE_WATCH_SLOW_ADD_MS", "") if debug else ""
    slow = int(slow_ms) / 1000.0 if slow_ms.isdigit() else 0.0
    _write_info(info_path, _starting_info(root, workspace_id, debounce_ms, foreground, 0))
    service = WatchService(
        home,
        root,
        workspace_id,
        debounce_ms=debounce_ms,
        user_home=user_home,
        on_mode=write_info,
        max_watches=int(limit) if limit.isdigit() else None,
        on_gone=stop.set,  # a folder deleted or moved away is not watched by a lingering daemon
        on_progress=progress,
    )
    try:
        service.start()
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(info_path)  # no "starting" left behind by a daemon that did not start
        raise
    starting = False
    server = Server(
        watchstate.bind_socket(sock_path),
        sock_path,
        service,
        user_home=user_home,
        debug_methods=debug,
    )
    server.start()
    write_info()
    from tillage.workspace.trees import TREES

    TREES.enabled = True  # this process seals this workspace again and again
    threading.Thread(
        target=_warm_up, args=(home, root, user_home, stop), name="tillage-warm-up", daemon=True
    ).start()
    sys.stderr.write(
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} watching {root} "
        f"(pid {os.getpid()}, {service.mode}, {service.watcher.watch_count()} folders, "
        f"debounce {debounce_ms} ms)\n"
    )
    sys.stderr.flush()
    try:
        while not stop.wait(3600):
            pass
    finally:
        # A store deleted or made anew at its path is not ours: its socket and info file (a
        # new watcher's, perhaps) stay as they are.
        ours = not service.store_gone()
        server.close(remove_socket=ours)
        if ours:
            with contextlib.suppress(OSError):
                os.unlink(info_path)
        service.stop(final_seal=True)
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} stopped\n")
        sys.stderr.flush()
    return 0
