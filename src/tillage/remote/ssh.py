"""The SSH remote: one long-lived `ssh [user@]host till remote-serve --stdio PATH` per Remote,
speaking the framed protocol (remote/wire.py) on the helper's stdin and stdout.

One process per remote, not one per call: an ssh connection costs about 300 ms to set up and
a round trip on an open one about 0.1 ms. Calls from several threads share it under a lock
(one request and its reply at a time). Every wait has a deadline, so a helper that dies is
RemoteUnavailableError at once (with the last line it wrote to stderr: ssh's own reason, or
the far side's), one that goes silent is RemoteUnavailableError after the idle timeout, and a
far side that is not tillage's protocol (another version, a login banner on stdout) is
RemoteProtocolError. A broken helper is stopped; the next call starts a new one.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections import deque
from urllib.parse import urlsplit

from tillage.errors import echo
from tillage.platform.launch import without_secrets
from tillage.remote.errors import (
    BadRemoteUrlError,
    InvalidRemoteNameError,
    RemoteMissingError,
    RemoteProtocolError,
    RemoteUnavailableError,
)
from tillage.remote.names import check_name, check_prefix
from tillage.remote.wire import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    Channel,
    FrameError,
    Header,
    PeerClosedError,
    PeerTimeoutError,
    WireError,
    join_names,
    split_names,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from tillage.errors import TillageError
    from tillage.remote.base import Remote, Versioned

# The longest silence of an open helper (a reply that has not begun, a write it does not
# read): a 64 MiB transfer resets it at every chunk, so only a dead or stopped peer reaches it.
IDLE_TIMEOUT = 60.0
# The first answer waits longer: ssh connects, may ask a person for a passphrase on the
# terminal, and starts tillage on the far side.
CONNECT_TIMEOUT = 120.0
# How long close() waits for the helper to leave on its own before it is stopped.
CLOSE_TIMEOUT = 5.0
# Names per `exists` request: 1,000 is what the engine asks; this keeps any batch in one frame.
EXISTS_BATCH = 50_000
_PIPE_SIZE = 1024 * 1024  # F_SETPIPE_SZ: fewer wake-ups per 8 MiB object (Linux; best effort)
_TAIL_LINES = 20

Reply = tuple[Header, bytes]
Replies = list[Reply]  # spelled here: inside SshRemote, `list` is the method

_SSH_NEXT = (
    "check that `ssh {dest}` works from this machine (keys, host key, port); TILLAGE_SSH sets "
    "the ssh command"
)
_TILL_NEXT = (
    "install tillage on {dest}, or name it with TILLAGE_REMOTE_TILL (a full path: ssh runs "
    "commands with a minimal PATH)"
)
_VERSION_NEXT = "install the same version of tillage on both machines"


def parse_ssh_url(url: str) -> tuple[str | None, str, int | None, str]:
    """`ssh://[user@]host[:port]/path` as (user, host, port, path); a path starting `/~` is
    the far side's home (`~/x`, `~user/x`). BadRemoteUrlError for anything else, and for a
    password (it would be kept in the remote's URL) or a user or host that ssh would read
    as an option."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BadRemoteUrlError(f"{_shown(url)} is not an ssh:// URL: {exc}") from None
    if parts.password is not None:
        raise BadRemoteUrlError(
            f"an ssh:// URL cannot hold a password ({_shown(url)})",
            next_step="use an ssh key or agent; ssh asks for a password on the terminal",
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise BadRemoteUrlError(f"{_shown(url)}: {exc}") from None
    if parts.scheme != "ssh" or not parts.hostname:
        raise BadRemoteUrlError(f"{_shown(url)} is not an ssh://[user@]host[:port]/path URL")
    if parts.query or parts.fragment:
        raise BadRemoteUrlError(f"{_shown(url)}: an ssh:// URL has no ?query or #fragment")
    user, host = parts.username, parts.hostname
    if user == "":
        raise BadRemoteUrlError(f"{_shown(url)}: the user before '@' is empty")
    if host.startswith("-") or (user is not None and user.startswith("-")):
        raise BadRemoteUrlError(f"{_shown(url)}: a user or host cannot start with '-'")
    path = parts.path
    if path.startswith("/~"):
        path = path[1:]
    if path in ("", "/", "~", "~/"):
        raise BadRemoteUrlError(
            f"{_shown(url)} names no folder on the far side",
            next_step="add the folder: ssh://host/srv/tillage/project (or ssh://host/~/folder)",
        )
    return user, host, port, path


def _shown(url: str) -> str:
    """The URL for a message: quoted, cut short, and a password (refused) never shown."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        url = f"{scheme}{sep}{userinfo.split(':', 1)[0]}:...@{hostport}{slash}{path}"
    return echo(url)


def ssh_command(url: str, env: Mapping[str, str]) -> list[str]:
    """The helper's command line for an ssh:// URL: TILLAGE_SSH (split as a shell would,
    like GIT_SSH_COMMAND; default `ssh`), `-p PORT`, the destination, and the far side's
    `TILLAGE_REMOTE_TILL remote-serve --stdio PATH` with every word quoted for its shell."""
    user, host, port, path = parse_ssh_url(url)
    try:
        ssh = shlex.split(env.get("TILLAGE_SSH") or "ssh")
        till = shlex.split(env.get("TILLAGE_REMOTE_TILL") or "till")
    except ValueError as exc:
        raise BadRemoteUrlError(
            f"TILLAGE_SSH or TILLAGE_REMOTE_TILL does not parse: {exc}"
        ) from None
    if not ssh or not till:
        raise BadRemoteUrlError("TILLAGE_SSH and TILLAGE_REMOTE_TILL cannot be empty")
    far = " ".join(shlex.quote(word) for word in [*till, "remote-serve", "--stdio", path])
    dest = f"{user}@{host}" if user else host
    return [*ssh, *(["-p", str(port)] if port is not None else []), dest, far]


class _Helper:
    """One running helper: the process, its framed channel and the tail of its stderr."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None) -> None:
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # ssh runs what the user's config says (ProxyCommand...): never with the key.
            env=without_secrets(os.environ if env is None else env),
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _widen(self.proc.stdin.fileno())
        _widen(self.proc.stdout.fileno())
        self.channel = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._reader = threading.Thread(target=self._drain, name="ssh-helper-stderr", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        """Keeps reading stderr (a full pipe would stall ssh), remembering the last lines."""
        stream = self.proc.stderr
        assert stream is not None
        fd, pending = stream.fileno(), b""
        try:
            while chunk := os.read(fd, 65536):
                *lines, pending = (pending + chunk).split(b"\n")
                self._remember(lines)
                pending = pending[-4096:]  # a line without an end is kept to its tail
        except (OSError, ValueError):
            pass
        self._remember([pending])

    def _remember(self, lines: list[bytes]) -> None:
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                self.tail.append(line)

    def last_line(self) -> str:
        """The helper's last words on stderr (ssh's reason, the far side's diagnostic)."""
        lines = [line for line in self.tail if not line.startswith("Warning: Permanently")]
        return lines[-1] if lines else ""

    def stop(self, wait: float) -> int | None:
        """Ends the helper: its stdin closed (the far side leaves at end of input), up to
        `wait` seconds to exit, then killed. Returns its exit status (negative: a signal)."""
        proc = self.proc
        for stream in (proc.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            status: int | None = proc.wait(timeout=wait) if wait > 0 else None
        except subprocess.TimeoutExpired:
            status = None
        if status is None and proc.poll() is None:
            proc.kill()
            status = proc.wait()
        self._reader.join(timeout=1.0)
        # stderr is closed only once its reader is done: a descriptor closed under a read in
        # progress could be reused by another file and read by mistake. (A grandchild that
        # keeps it open, as a ControlPersist master does, leaves the reader to the end.)
        streams = (proc.stdout,) if self._reader.is_alive() else (proc.stdout, proc.stderr)
        for stream in streams:
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return proc.returncode if status is None else status


def _widen(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, _PIPE_SIZE)  # F_SETPIPE_SZ
    except (ImportError, OSError):
        pass  # not Linux, or over /proc/sys/fs/pipe-max-size: the default size works


class SshRemote:
    """A Remote on another machine through the system `ssh` (see the module doc).

    `command` is the helper's whole command line (`ssh_command` builds it from a URL; a test
    may run `till remote-serve --stdio PATH` directly). It starts at once and shakes hands,
    so an unreachable host or a missing tillage is told when the remote is opened."""

    def __init__(
        self,
        url: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = IDLE_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        destination: str = "the far side",
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._command = tuple(command)
        self._env = dict(env) if env is not None else None
        self._dest = destination
        self._lock = threading.Lock()
        self._helper: _Helper | None = None
        self._closed = False
        with self._lock:
            self._connect()

    @classmethod
    def from_url(cls, url: str, env: Mapping[str, str]) -> Remote:
        """Opens `ssh://[user@]host[:port]/path` (see `ssh_command` for TILLAGE_SSH and
        TILLAGE_REMOTE_TILL); BadRemoteUrlError, or RemoteUnavailableError when it cannot
        be reached."""
        user, host, _port, _path = parse_ssh_url(url)
        return cls(
            url, ssh_command(url, env), env=env, destination=f"{user}@{host}" if user else host
        )

    # -- the Remote seam --------------------------------------------------------------------

    def exists(self, names: Sequence[str]) -> set[str]:
        """The names present, asked in batches of up to EXISTS_BATCH per round trip."""
        wanted = list(names)
        for name in wanted:
            check_name(name)
        present: set[str] = set()
        for start in range(0, len(wanted), EXISTS_BATCH):
            batch = wanted[start : start + EXISTS_BATCH]
            (reply,) = self._call({"op": "exists"}, join_names(batch))
            present.update(split_names(reply[1]))
        return present

    def put(self, name: str, data: bytes) -> None:
        check_name(name)
        self._fits(name, data)
        self._call({"op": "put", "name": name}, data)

    def get(self, name: str) -> bytes:
        check_name(name)
        (reply,) = self._call({"op": "get", "name": name})
        return reply[1]

    def list(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        names: list[str] = []
        for _, payload in self._call({"op": "list", "prefix": prefix}, many=True):
            names.extend(split_names(payload))
        return names

    def delete(self, name: str) -> None:
        check_name(name)
        self._call({"op": "delete", "name": name})

    def read_versioned(self, name: str) -> Versioned | None:
        from tillage.remote.base import Versioned

        check_name(name)
        ((header, payload),) = self._call({"op": "read_versioned", "name": name})
        if header.get("found") is not True:
            return None
        token = header.get("token")
        if not isinstance(token, str):
            raise RemoteProtocolError(f"{self.url}: a version token of {token!r}")
        return Versioned(data=payload, token=token)

    def write_if(self, name: str, data: bytes, expect: str | None) -> bool:
        check_name(name)
        self._fits(name, data)
        ((header, _),) = self._call({"op": "write_if", "name": name, "expect": expect}, data)
        written = header.get("written")
        if not isinstance(written, bool):
            raise RemoteProtocolError(f"{self.url}: write_if answered written={written!r}")
        return written

    def close(self) -> None:
        """Ends the helper cleanly (end of input; killed after CLOSE_TIMEOUT). Idempotent;
        a closed remote refuses further calls."""
        with self._lock:
            self._closed = True
            helper, self._helper = self._helper, None
            if helper is not None:
                helper.stop(CLOSE_TIMEOUT)

    def __enter__(self) -> SshRemote:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def helper_pid(self) -> int | None:
        """The local helper's (ssh's) process ID; None while none runs (fault tests)."""
        helper = self._helper
        return helper.proc.pid if helper is not None else None

    def __repr__(self) -> str:
        return f"SshRemote({self.url!r})"

    # -- the helper -------------------------------------------------------------------------

    def _fits(self, name: str, data: bytes) -> None:
        if len(data) > MAX_PAYLOAD:
            raise RemoteProtocolError(
                f"{self.url}: {name} is {len(data)} bytes, over the {MAX_PAYLOAD} bytes one "
                "SSH frame carries",
                next_step="store objects under 64 MiB (the sync engine's objects always are)",
            )

    def _call(self, header: Header, payload: bytes = b"", *, many: bool = False) -> Replies:
        """One request and its replies (a `list` answer may take several frames), under the
        lock; an error reply is raised as the error it names."""
        with self._lock:
            if self._closed:
                raise RemoteUnavailableError(f"{self.url}: this remote was closed")
            helper = self._helper if self._helper is not None else self._connect()
            channel = helper.channel
            try:
                try:
                    channel.send(header, payload, timeout=self.timeout)
                except PeerClosedError:
                    # The far side may have refused the request and left: its reason first.
                    last = channel.receive(timeout=1.0)
                    self._discard(helper)
                    self._check(last[0])
                    raise
                replies = [channel.receive(timeout=self.timeout)]
                while many and "error" not in replies[-1][0] and replies[-1][0].get("more"):
                    replies.append(channel.receive(timeout=self.timeout))
            except WireError as exc:
                raise self._broken(helper, exc) from None
            except BaseException:
                self._discard(helper)  # cut short (an interrupt): the stream is out of step
                raise
        for reply in replies:
            self._check(reply[0])
        return replies

    def _connect(self) -> _Helper:
        """Starts the helper and shakes hands (the lock is held)."""
        try:
            helper = _Helper(self._command, self._env)
        except OSError as exc:
            raise RemoteUnavailableError(
                f"{self.url}: cannot start {self._command[0]!r}: {exc.strerror or exc}",
                next_step="install OpenSSH's client, or set TILLAGE_SSH to the ssh command",
            ) from None
        try:
            helper.channel.send(
                {"op": "hello", "version": PROTOCOL_VERSION}, timeout=self.connect_timeout
            )
            header, _ = helper.channel.receive(timeout=self.connect_timeout)
        except WireError as exc:
            raise self._broken(helper, exc, connecting=True) from None
        except BaseException:
            self._discard(helper)
            raise
        error = header.get("error")
        if error is not None or header.get("version") != PROTOCOL_VERSION:
            helper.stop(0)
            theirs = error.get("version") if isinstance(error, dict) else header.get("version")
            if isinstance(error, dict) and error.get("kind") != "version":
                self._check(header)
            raise RemoteProtocolError(
                f"{self.url}: the far side speaks remote protocol version {theirs!r}, this "
                f"tillage speaks {PROTOCOL_VERSION}",
                next_step=_VERSION_NEXT,
            )
        if header.get("ok") is not True:
            helper.stop(0)
            raise RemoteProtocolError(f"{self.url}: the far side's handshake was {header!r}")
        self._helper = helper
        return helper

    def _discard(self, helper: _Helper) -> None:
        """Stops a helper whose stream can no longer be trusted, at once."""
        if self._helper is helper:
            self._helper = None
        helper.stop(0)

    def _broken(self, helper: _Helper, exc: WireError, *, connecting: bool = False) -> TillageError:
        """The error for a helper whose stream failed; the helper is stopped and forgotten,
        so the next call starts a new one."""
        if self._helper is helper:
            self._helper = None
        timed_out = isinstance(exc, PeerTimeoutError)
        status = helper.stop(0 if timed_out else 2.0)
        said = helper.last_line()
        because = f": {said}" if said else ""
        dest = self._dest
        if isinstance(exc, FrameError):
            return RemoteProtocolError(
                f"{self.url}: the far side does not speak tillage's remote protocol ({exc})"
                f"{because}",
                next_step="check that TILLAGE_REMOTE_TILL names tillage on "
                f"{dest} and that its login shell prints nothing on stdout",
            )
        if timed_out:
            limit = self.connect_timeout if connecting else self.timeout
            return RemoteUnavailableError(
                f"{self.url}: {dest} sent nothing for {limit:g} s; the helper was stopped{because}",
                next_step=_SSH_NEXT.format(dest=dest),
            )
        what = "could not start" if connecting else "ended"
        ended = f"exit status {status}" if status is not None and status >= 0 else "killed"
        if status is not None and status < 0:
            ended = f"killed by signal {-status}"
        next_step = _SSH_NEXT.format(dest=dest)
        if status == 127 or "not found" in said:
            next_step = _TILL_NEXT.format(dest=dest)
        return RemoteUnavailableError(
            f"{self.url}: the ssh helper {what} ({ended}){because}", next_step=next_step
        )

    def _check(self, header: Header) -> None:
        """Raises the error an error reply names (the far side's own kind of error)."""
        error = header.get("error")
        if error is None:
            if header.get("ok") is not True:
                raise RemoteProtocolError(f"{self.url}: a reply without ok or error: {header!r}")
            return
        if not isinstance(error, dict):
            raise RemoteProtocolError(f"{self.url}: an error reply of {error!r}")
        kind, message = error.get("kind"), str(error.get("message", ""))
        if kind == "missing":
            raise RemoteMissingError(str(error.get("name", "")), self.url)
        if kind == "invalid_name":
            raise InvalidRemoteNameError(message)
        if kind in ("protocol", "version"):
            raise RemoteProtocolError(f"{self.url}: {message}", next_step=_VERSION_NEXT)
        raise _far_error(self.url, error, message)


def _far_error(url: str, error: Mapping[str, object], message: str) -> TillageError:
    """A failure on the far side as the same public error when it is one this side knows
    (busy, integrity...), else RemoteUnavailableError: the remote could not do it."""
    from tillage.errors import SHARED_ERRORS

    known: Iterable[type[TillageError]] = (
        *SHARED_ERRORS,
        RemoteUnavailableError,
        RemoteProtocolError,
    )
    code = error.get("code")
    next_step = error.get("next")
    for cls in known:
        if code == cls.code and error.get("kind") == "tillage":
            return cls(
                f"{url}: {message}", next_step=next_step if isinstance(next_step, str) else None
            )
    return RemoteUnavailableError(
        f"{url}: {message}", next_step="check the folder on the far side (space, permissions)"
    )
