"""Where a workspace's watcher keeps its run-time files, and how a seal asks it what changed.

Everything here is a hint for speed: a seal that finds no watcher, or one that cannot vouch for
the interval since the last seal, walks the whole folder (core.changes). The command line imports
this module on every start, so it keeps to a few lean standard modules.

Run files live in `<store>/run/` (0700): the socket `watch-<id>.sock` (0600), the info file
`watch-<id>.json` (pid, mode, reason, debounce, start time) and the daemon's log. The daemon
holds an exclusive flock on `<store>/locks/watch-<id>.lock` for its whole life, so a crashed
daemon is never reported as watching: the kernel released its lock.
"""

from __future__ import annotations

import json
import os
import stat
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from pathlib import Path
    from typing import Any

    from tillage.core.changes import Changes, ChangeSource
    from tillage.workspace.attach import Workspace

# Watchers running in this process (the daemon), by workspace ID: a seal in the same process
# asks them directly instead of over the socket.
_LOCAL: dict[str, ChangeSource] = {}
_LOCAL_LOCK = threading.Lock()

# Workspaces whose watcher did not answer this process in time (the console script's door
# found it hung, or stopped with SIGSTOP): a seal here walks the folder instead of waiting
# CALL_TIMEOUT for the same silence.
_SILENT: set[str] = set()

SUN_PATH_MAX = 107  # bytes of a Unix socket path, without the terminating NUL
CALL_TIMEOUT = 3.0  # seconds a seal waits for the watcher's answer before walking everything


def register_local(workspace_id: str, source: ChangeSource | None) -> None:
    """Makes `source` the answer for seals of `workspace_id` in this process (None removes)."""
    with _LOCAL_LOCK:
        if source is None:
            _LOCAL.pop(workspace_id, None)
        else:
            _LOCAL[workspace_id] = source


def distrust(workspace_id: str) -> None:
    """Asks nothing more of this workspace's watcher in this process: it did not answer."""
    with _LOCAL_LOCK:
        _SILENT.add(workspace_id)


def run_dir(home: Path) -> Path:
    """The store's folder for run-time files (sockets, pid info, the daemon's log)."""
    return home / "run"


def ensure_run_dir(home: Path) -> Path:
    """Creates the run folder owner-only (0700), whatever the umask, and returns it."""
    path = run_dir(home)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if stat.S_IMODE(os.lstat(path).st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def socket_path(home: Path, workspace_id: str) -> Path:
    """The watcher's JSON-RPC socket for one workspace."""
    return run_dir(home) / f"watch-{workspace_id}.sock"


def info_path(home: Path, workspace_id: str) -> Path:
    """The watcher's info file: pid, mode, reason, debounce_ms, started_at."""
    return run_dir(home) / f"watch-{workspace_id}.json"


def log_path(home: Path, workspace_id: str) -> Path:
    """Where the detached daemon's stdout and stderr go."""
    return run_dir(home) / f"watch-{workspace_id}.log"


def cookie_dir(home: Path, workspace_id: str) -> Path:
    """The folder where the watcher drops sync cookies (never inside the workspace)."""
    return run_dir(home) / f"cookies-{workspace_id}"


def lock_path(home: Path, workspace_id: str) -> Path:
    """The flock the daemon holds for its whole life: held means a watcher is alive."""
    return home / "locks" / f"watch-{workspace_id}.lock"


def is_watching(home: Path, workspace_id: str) -> bool:
    """True while a watcher process holds the workspace's watch lock (a crashed one does not:
    the kernel drops a dead process's flock)."""
    from tillage.platform.locks import is_held

    return is_held(lock_path(home, workspace_id))


def read_info(home: Path, workspace_id: str) -> dict[str, Any] | None:
    """The running watcher's info file, or None (no watcher, or the file is unreadable)."""
    try:
        with open(info_path(home, workspace_id), "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _sun_path(path: Path) -> tuple[str, int | None]:
    """The address to bind or connect `path` at, and a descriptor the caller closes after: a
    path longer than sun_path allows is reached through its folder's /proc/self/fd entry."""
    text = os.fsencode(str(path))
    if len(text) <= SUN_PATH_MAX:
        return str(path), None
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{path.name}", fd


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, owner-only (0600) from the moment it exists."""
    import socket  # 3.5 ms: `till status` without a watcher never opens one

    address, fd = _sun_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
        if fd is not None:
            os.close(fd)
    os.chmod(path, 0o600)
    sock.listen(64)
    return sock


def connect(home: Path, workspace_id: str, timeout: float) -> socket.socket:
    """A connection to the workspace's watcher; OSError when there is none."""
    import socket

    address, fd = _sun_path(socket_path(home, workspace_id))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


class RpcError(Exception):
    """The watcher answered a call with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def call(home: Path, workspace_id: str, method: str, params: dict[str, Any], timeout: float) -> Any:
    """One JSON-RPC call to the watcher; OSError when it cannot be reached, RpcError when it
    answers with an error."""
    with connect(home, workspace_id, timeout) as sock:
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        sock.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            piece = sock.recv(65536)
            if not piece:
                raise ConnectionError("the watcher closed the connection")
            buf += piece
    try:
        answer = json.loads(buf)
    except ValueError as exc:
        raise ConnectionError("the watcher answered something that is not JSON") from exc
    if "error" in answer:
        err = answer["error"] or {}
        raise RpcError(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))
    return answer.get("result")


class SocketChangeSource:
    """Asks the workspace's watcher over its socket; any failure means "walk everything"."""

    def __init__(self, home: Path, workspace_id: str, timeout: float = CALL_TIMEOUT) -> None:
        self.home = home
        self.workspace_id = workspace_id
        self.timeout = timeout

    def since(self, token: str | None) -> Changes:
        from tillage.core.changes import Changes  # dataclasses: not on every CLI start

        try:
            result = call(
                self.home,
                self.workspace_id,
                "tillage.changes_since",
                {"token": token},
                self.timeout,
            )
            new_token = result["token"]
            dirs = result["dirs"]
            if not isinstance(new_token, str):
                raise TypeError("token")
            if dirs is None:
                return Changes(new_token, None)
            told = result.get("names") or {}  # a folder not told by name is listed whole
            names = {str(d): frozenset(str(n) for n in ns) for d, ns in told.items()}
            return Changes(new_token, frozenset(str(d) for d in dirs), names)
        except (OSError, RpcError, ValueError, TypeError, KeyError):
            # A watcher that cannot answer vouches for nothing: the seal walks everything, and
            # the old token stays (the watcher's next answer for it is a superset).
            return Changes(token or "", None)


def scan_is_bounded(ws: Workspace, files: int, *, walk_max: int, watched_max: int) -> bool:
    """Whether a live scan of `ws`, whose head holds `files` files, can be cheap: a walk of
    at most `walk_max` files, or a watcher's delta over a path index of at most `watched_max`
    (read whole). Asked before the seal's modules are imported: `till status` on a folder too
    large to check costs their 20 ms for nothing."""
    if files > watched_max:
        return False
    return files <= walk_max or change_source(ws) is not None


def change_source(ws: Workspace) -> ChangeSource | None:
    """The watcher that can say what changed in `ws` since a token, or None (walk it all)."""
    with _LOCAL_LOCK:
        local = _LOCAL.get(ws.id)
        silent = ws.id in _SILENT
    if local is not None:
        return local
    if silent:
        return None
    home = ws.store.home
    try:
        os.lstat(socket_path(home, ws.id))
    except OSError:
        return None
    if not is_watching(home, ws.id):
        return None
    return SocketChangeSource(home, ws.id)
