"""Running a user's command the one way every verb does (fork, run, exec, try, merge checks,
bisect probes): one word goes to `/bin/sh -c`, several are exec'd as argv; stdout and stderr
are captured together (the tail kept, capped) and passed on live; exit statuses read like a
shell's (128+signal for a killed command, 127 for one that cannot be found). A caller that
serves others (the MCP server) may cancel the commands its calls run (`cancellable`).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tillage.errors import InvalidArgumentError
from tillage.platform.interrupts import interruptions_held
from tillage.platform.launch import Launch, inherited_env, without_secrets

DEFAULT_CAP = 65536
SHELL = "/bin/sh"
STOP_GRACE = 2.0  # seconds an interrupted command gets to exit after SIGTERM


class Cancelled(KeyboardInterrupt):
    """A command stopped because the call that ran it was cancelled (an MCP client's
    `notifications/cancelled`, or the server stopping): delivered like Ctrl-C, so the verbs'
    own interruption paths (a fork sealed as it was, a try's after-seal) run as they do for a
    person at a terminal. `reason` says who stopped it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelToken:
    """Cancels the commands of one call, from any thread: `cancel()` stops the one running
    (its whole process group) and refuses any the call would start after. A pipe, so the
    command's wait wakes at once and an idle call costs nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read, self._write = os.pipe()
        self._closed = False
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def fileno(self) -> int:
        """The descriptor that becomes readable once cancelled."""
        return self._read

    def cancel(self, reason: str) -> None:
        """Cancels (the first reason given stands); a no-op once closed."""
        with self._lock:
            if self.reason is not None or self._closed:
                return
            self.reason = reason
            with contextlib.suppress(OSError):
                os.write(self._write, b"x")

    def close(self) -> None:
        """Releases the descriptors (the call is over)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._read)
            os.close(self._write)

    def check(self) -> None:
        """Raises Cancelled when cancelled."""
        if self.reason is not None:
            raise Cancelled(self.reason)


_CANCEL: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar(
    "tillage_cancel", default=None
)


@contextlib.contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Every command run_command starts in this context (this thread, and the threads a verb
    starts with contextvars.copy_context()) is stopped when `token` is cancelled."""
    reset = _CANCEL.set(token)
    try:
        yield token
    finally:
        _CANCEL.reset(reset)


@dataclass(frozen=True)
class CommandOutcome:
    """A finished command: its exit status (as a shell reports it) and its combined output,
    the last `cap` bytes decoded as UTF-8 (invalid bytes replaced), headed by a
    "[... N bytes cut]" line when earlier output was dropped."""

    exit_code: int
    output: str


def argv_of(command: tuple[str, ...]) -> list[str]:
    """Returns what is exec'd for `command`: one word runs through the shell (so shell syntax
    works, as in a merge check), several are the argv themselves (no shell, no quoting)."""
    if not command or not any(word.strip() for word in command):
        raise InvalidArgumentError(
            "no command given", next_step="put the command after `--`, e.g. `-- make test`"
        )
    if len(command) == 1:
        return [SHELL, "-c", command[0]]
    return list(command)


class _Tail:
    """The last `cap` bytes written to it, and how many came before them."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.buf = bytearray()
        self.cut = 0

    def add(self, data: bytes) -> None:
        self.buf += data
        over = len(self.buf) - self.cap
        if over > 0:
            del self.buf[:over]
            self.cut += over

    def text(self) -> str:
        body = self.buf.decode("utf-8", errors="replace")
        if self.cut:
            return f"[... {self.cut} bytes cut]\n{body}"
        return body


def _pass_on(live: BinaryIO | None, data: bytes) -> BinaryIO | None:
    """Copies `data` to the live output; a closed or broken one is dropped (None) so the
    command keeps running and its output is still captured."""
    if live is None:
        return None
    try:
        live.write(data)
        live.flush()
    except (OSError, ValueError):
        return None
    return live


def run_command(
    command: tuple[str, ...],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    launch: Launch | None = None,
    cap: int = DEFAULT_CAP,
    inherit_stdin: bool = False,
    on_start: Callable[[int], None] | None = None,
) -> CommandOutcome:
    """Runs `command` in `cwd` and waits for it, with no timeout (its runtime is the caller's
    business). `env` adds to (and overrides) the environment `launch` gives (this process's
    when there is none), less the secrets (platform.launch: `env` cannot add one back). Its
    stdin is /dev/null unless `inherit_stdin`; its stdout and stderr go into one pipe that is
    captured (last `cap` bytes) and copied live to `launch.output` when there is one.

    A command killed by signal N reports 128+N; one that cannot be started reports 127 (not
    found) or 126 (not executable) with the reason in `output`, as a shell would. It runs in
    a process group of its own; when the caller is interrupted while waiting, that group is
    stopped (SIGTERM, then SIGKILL) before the interruption goes on. `on_start(pid)` is told
    the command's pid (= its process group) once it runs: a caller running commands in other
    threads stops them with stop_group() when it is interrupted itself. In a `cancellable`
    context, a cancel stops the command the same way and raises Cancelled (a command asked
    for after the cancel is not started).
    """
    argv = argv_of(command)
    token = _CANCEL.get()
    if token is not None:
        token.check()
    full_env = inherited_env(launch)
    if env:
        full_env = without_secrets({**full_env, **env})
    tail = _Tail(cap)
    read_fd, write_fd = os.pipe()
    proc: subprocess.Popen[bytes] | None = None
    try:
        # An interruption during the spawn waits until the group is known: one that came
        # between Popen and the stop below would leave the command running on its own.
        with interruptions_held():
            try:
                proc = _spawn(argv, cwd, full_env, write_fd, inherit_stdin=inherit_stdin)
            except OSError as exc:
                return _not_started(argv, cwd, exc, launch)
            finally:
                os.close(write_fd)
            if on_start is not None:
                on_start(proc.pid)
        _drain(read_fd, proc, tail, launch.output if launch else None, token)
        code = proc.wait()
    except BaseException:
        if proc is not None:  # interrupted (Ctrl-C, SIGTERM): the command does not outlive us
            _stop_group(proc, own_group=not inherit_stdin)
        raise
    finally:
        os.close(read_fd)
    if code < 0:
        code = 128 - code
    return CommandOutcome(exit_code=code, output=tail.text())


def _spawn(
    argv: list[str], cwd: Path | str, env: Mapping[str, str], out_fd: int, *, inherit_stdin: bool
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=None if inherit_stdin else subprocess.DEVNULL,
        stdout=out_fd,
        stderr=out_fd,
        close_fds=True,
        # Its own group, so that stopping it stops what it started too; a command that
        # shares our stdin stays in our group (a background group may not read a terminal).
        process_group=None if inherit_stdin else 0,
    )


def _not_started(
    argv: list[str], cwd: Path | str, exc: OSError, launch: Launch | None
) -> CommandOutcome:
    """What a shell says of a command it cannot start: 127 (not found) or 126 (not
    executable), with the reason."""
    status = 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 126
    if not os.path.isdir(cwd):
        status = 127
    reason = exc.strerror or str(exc)
    message = f"till: {argv[0]}: {reason.lower() if status == 126 else 'command not found'}"
    if not os.path.isdir(cwd):
        message = f"till: cannot run in {cwd}: {reason}"
    message += "\n"
    _pass_on(launch.output if launch else None, message.encode())
    return CommandOutcome(exit_code=status, output=message)


def stop_group(pgid: int) -> None:
    """Sends SIGTERM to a command's process group (its pid, from on_start), for a caller
    interrupted while its commands run in other threads; their run_command then returns."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)


def _stop_group(proc: subprocess.Popen[bytes], *, own_group: bool) -> None:
    """Stops the command (its process group when it has one): SIGTERM, then SIGKILL after a
    grace period. What the command started is stopped too: a child still in the group once the
    command has gone gets the same grace, then SIGKILL (no orphan outlives the call)."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if own_group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if own_group:
            _empty_group(proc.pid, grace)
        return


def _empty_group(pgid: int, grace: float) -> None:
    """Waits up to `grace` seconds for process group `pgid` to have no member left, then
    SIGKILLs whoever remains (a child that ignored SIGTERM)."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(
    read_fd: int,
    proc: subprocess.Popen[bytes],
    tail: _Tail,
    live: BinaryIO | None,
    token: CancelToken | None = None,
) -> None:
    """Reads the command's output until the pipe closes, or until the command has exited and
    the pipe has nothing more to give (a background child that keeps the pipe open must not
    keep the caller waiting forever). Raises Cancelled as soon as `token` is cancelled."""
    pidfd = -1
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(proc.pid)
    try:
        poller = select.poll()
        poller.register(read_fd, select.POLLIN | select.POLLHUP)
        if pidfd >= 0:
            poller.register(pidfd, select.POLLIN)
        if token is not None:
            poller.register(token.fileno(), select.POLLIN)
            token.check()  # cancelled between the start and here
        exited = False
        while True:
            timeout = 0 if exited else (None if pidfd >= 0 else 100)
            events = poller.poll(timeout)
            if not events:
                if exited:
                    return
                if proc.poll() is not None:
                    exited = True
                continue
            for fd, _mask in events:
                if token is not None and fd == token.fileno():
                    token.check()
                    continue
                if fd == pidfd:
                    exited = True
                    poller.unregister(pidfd)
                    continue
                data = os.read(read_fd, 65536)
                if not data:
                    return
                tail.add(data)
                live = _pass_on(live, data)
    finally:
        if pidfd >= 0:
            os.close(pidfd)
