"""The watcher daemon's life cycle, seen from a command: start it detached, stop it, ask it.

One watcher per workspace: the daemon holds the workspace's watch flock for its whole life
(watchstate.lock_path), so however many `till watch` calls race, one daemon wins and the
others exit quietly; every caller waits until the winner answers `tillage.ping`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tillage.errors import UnavailableError
from tillage.workspace import watchstate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

# Seconds `till watch` waits for the daemon to answer, counted from its last sign of progress:
# a daemon still adding its first watches (126,785 folders took 85 s at load 5) reports how
# many it holds in its info file, and every new count starts the wait again.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 60.0  # seconds `till watch --stop` waits (the daemon seals what is pending)
PING_TIMEOUT = 1.0


def daemon_argv(home: Path, root: Path, debounce_ms: int, *, foreground: bool) -> list[str]:
    """The command line of the daemon process for one workspace."""
    argv = [
        sys.executable,
        "-m",
        "tillage.hosts.daemon",
        "--home",
        str(home),
        "--root",
        str(root),
        "--debounce-ms",
        str(debounce_ms),
    ]
    if foreground:
        argv.append("--foreground")
    return argv


def ping(home: Path, workspace_id: str, timeout: float = PING_TIMEOUT) -> dict[str, Any] | None:
    """The watcher's self-description, or None when no watcher answers."""
    try:
        doc = watchstate.call(home, workspace_id, "tillage.ping", {}, timeout)
    except (OSError, watchstate.RpcError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def log_tail(home: Path, workspace_id: str, limit: int = 2000) -> str:
    """The end of the daemon's log, for an error that says why it did not come up."""
    try:
        with open(watchstate.log_path(home, workspace_id), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def start(
    home: Path,
    root: Path,
    workspace_id: str,
    debounce_ms: int,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Starts the workspace's watcher detached (unless one runs) and returns its ping answer
    once it answers; unavailable, with the log's tail, when it never does. The daemon
    inherits `env`, the caller's environment (None: this process's): it seals as the caller's
    own `till` would (TILLAGE_NOW, the agent) from then on."""
    from tillage.platform.identity import code_identity

    for _attempt in range(3):
        if watchstate.is_watching(home, workspace_id):
            doc = ping(home, workspace_id)
            if doc is not None and doc.get("code") == code_identity():
                return doc
            if doc is not None:  # a watcher of another install (an upgrade): replace it
                stop(home, workspace_id)
        doc = _spawn_and_wait(home, root, workspace_id, debounce_ms, env)
        if doc is not None:
            return doc
    return _not_started(home, workspace_id)


def _spawn_and_wait(
    home: Path, root: Path, workspace_id: str, debounce_ms: int, env: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """Spawns one daemon and waits for a watcher (ours or a racing winner) to answer; None
    when ours lost the race and the winner is gone too (try again)."""
    import subprocess

    run = watchstate.ensure_run_dir(home)
    seen = _progress(home, workspace_id)  # a crashed daemon's stale file is no progress
    log_fd = os.open(
        watchstate.log_path(home, workspace_id),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
        0o600,
    )
    try:
        proc = subprocess.Popen(
            daemon_argv(home, root, debounce_ms, foreground=False),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,  # survives the terminal closing
            close_fds=True,
            cwd=str(run),
            env=None if env is None else dict(env),
        )
    finally:
        os.close(log_fd)
    _keep_until_reaped(proc)
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.01
    while time.monotonic() < deadline:
        doc = ping(home, workspace_id)
        if doc is not None:
            return doc
        code = proc.poll()
        if code not in (None, 0):
            break  # it failed; a loser of the race exits 0 and we wait for the winner
        if code == 0 and not watchstate.is_watching(home, workspace_id):
            return None  # the process that beat ours to the lock has gone too
        now = _progress(home, workspace_id)
        if now is not None and now != seen:
            seen = now  # still adding watches: starting, not stuck
            deadline = time.monotonic() + START_TIMEOUT
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return _not_started(home, workspace_id)


def _progress(home: Path, workspace_id: str) -> tuple[object, object] | None:
    """(pid, watches) of a daemon that reports it is still adding its first watches."""
    info = watchstate.read_info(home, workspace_id)
    if info is None or info.get("mode") != "starting":
        return None
    return info.get("pid"), info.get("watches")


# The daemons this process started, kept until they exit: a caller that lives on (the MCP
# server, a library user, a test) reaps them at its next start, so none stays a zombie, and
# none is dropped while it runs (which subprocess would warn of).
_STARTED: list[Any] = []


def _keep_until_reaped(proc: Any) -> None:
    _STARTED[:] = [p for p in _STARTED if p.poll() is None]
    _STARTED.append(proc)


def _not_started(home: Path, workspace_id: str) -> NoReturn:
    tail = log_tail(home, workspace_id)
    raise UnavailableError(
        "the background watcher did not start" + (f": {tail[-600:]}" if tail else ""),
        next_step="run `till watch --foreground` to see why, or seal with `till snap`",
        details={"log": str(watchstate.log_path(home, workspace_id))},
    )


def stop(home: Path, workspace_id: str, root: Path | None = None) -> bool:
    """Stops the workspace's watcher (SIGTERM, then waits until its lock is free); returns
    whether one was running. With `root`, a stray watcher of that folder is stopped too: one
    whose store at `home` was deleted (or made anew) under it holds no lock there, and would
    otherwise run on after "stopped" (it stops itself once it notices, see service.py)."""
    stopped = _stop_locked(home, workspace_id)
    for pid in _strays(home, root) if root is not None else ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            stopped = True
        if not _wait_exited(pid, STOP_TIMEOUT):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            if not _wait_exited(pid, 5.0):
                raise UnavailableError(
                    f"a watcher of this folder (pid {pid}) did not stop",
                    next_step=f"stop it with `kill -9 {pid}`",
                )
    return stopped


def _strays(home: Path, root: Path) -> list[int]:
    """The watcher daemons of folder `root` started with a store at `home` that are still
    running (after the one holding the lock was stopped: those of a store deleted under
    them). Read from /proc, where the daemons' command lines name both."""
    want = (os.path.realpath(home), os.path.realpath(root))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = [os.fsdecode(a) for a in f.read().split(b"\0")]
        except OSError:
            continue
        if "tillage.hosts.daemon" not in args:
            continue
        named = (_option(args, "--home"), _option(args, "--root"))
        if None in named:
            continue
        if tuple(os.path.realpath(str(n)) for n in named) == want and not _exited(int(entry)):
            found.append(int(entry))
    return found


def _option(args: list[str], name: str) -> str | None:
    with contextlib.suppress(ValueError, IndexError):
        return args[args.index(name) + 1]
    return None


def _stop_locked(home: Path, workspace_id: str) -> bool:
    """Stops the watcher holding the workspace's watch lock; whether one did."""
    if not watchstate.is_watching(home, workspace_id):
        return False
    pid = _pid(home, workspace_id)
    if pid is None:
        if _wait_free(home, workspace_id, 5.0):
            return True
        raise UnavailableError(
            "a watcher holds this workspace's watch lock but does not answer",
            next_step=f"find it with `fuser {watchstate.lock_path(home, workspace_id)}`",
        )
    if pid == os.getpid():
        os.kill(pid, signal.SIGTERM)  # asked over our own socket: the main thread stops us
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_free(home, workspace_id, STOP_TIMEOUT):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not _wait_free(home, workspace_id, 5.0):
            raise UnavailableError(
                f"the watcher (pid {pid}) did not stop",
                next_step=f"stop it with `kill -9 {pid}`",
            )
    # Free, it is shutting down: stopped means gone, so nothing it still does (closing the
    # store, leaving the interpreter) overlaps what the caller does next.
    _wait_exited(pid, STOP_TIMEOUT)
    return True


def _wait_exited(pid: int, timeout: float) -> bool:
    """Waits until process `pid` has exited (reaping it when this process started it)."""
    deadline = time.monotonic() + timeout
    while not _exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _exited(pid: int) -> bool:
    """True once every thread of `pid` is done (a killed leader is a zombie while the others
    still exit, holding its files)."""
    for proc in _STARTED:
        if proc.pid == pid:
            return proc.poll() is not None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return False
    return True


def _pid(home: Path, workspace_id: str) -> int | None:
    """The running watcher's pid: from its info file, or (while it starts) its ping."""
    deadline = time.monotonic() + 5.0
    while True:
        info = watchstate.read_info(home, workspace_id) or ping(home, workspace_id) or {}
        pid = info.get("pid")
        if isinstance(pid, int) and pid > 0:
            return pid
        if time.monotonic() >= deadline or not watchstate.is_watching(home, workspace_id):
            return None
        time.sleep(0.05)


def _wait_free(home: Path, workspace_id: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while watchstate.is_watching(home, workspace_id):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def exec_foreground(home: Path, root: Path, debounce_ms: int) -> NoReturn:
    """Replaces this process with the watcher, running in the foreground until SIGINT or
    SIGTERM (same pid, same terminal)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    argv = daemon_argv(home, root, debounce_ms, foreground=True)
    os.execv(argv[0], argv)
