"""The `till` console script: through the watcher's socket when that gives the same answer
sooner, else the whole command line in this process (main.py).

An agent calls `till` hundreds of times a session, and most of a local call is start-up:
importing argparse, pathlib, the registry, sqlite and the store before any work. A workspace
with a watcher running has all of that loaded already, so this door sends the command line to
the watcher (`tillage.cli` on its socket, docs/design/socket.md) and prints what comes back.

It takes the socket only when nothing about the answer could differ: machine mode (stdin,
stdout and stderr are not terminals, so no prompt, colour or progress line is at stake), a
command in SOCKET_COMMANDS (short calls an agent repeats, and `fork` without a command, whose
copy the warm watcher starts at once), no `--help`/`--debug`, `--` or a command after it, and a
workspace pointer above the folder whose watcher's socket answers a ping within DOOR_TIMEOUT.
Anything else, and any failure before a byte is printed (no socket, a stale socket, a refused
connection, a broken or odd reply, an error reply), runs the command here instead, so the
answer is never different and never waits on a dead watcher. A watcher that said nothing in
time (hung, or stopped with SIGSTOP) is not asked again by the seal that runs here instead
(watchstate.distrust): it walks the folder rather than wait for the same silence.

A hook (HANDSHAKE_COMMANDS) runs inside an agent's loop and must be quick even when the watcher
is not, so it does not wait for the watcher's answer without limit: the watcher says
`tillage.starting` before it runs the command and runs it only once this door has answered
`tillage.go`. A door that heard nothing within DOOR_TIMEOUT hangs up instead and seals here; a
watcher that finds the caller gone runs nothing. So exactly one of the two seals the hook, at
the moment it was called, never both and never a stale one later.

Before either, a `till` given the recovery key (or its file) in argv or environ runs itself
again with both scrubbed and the key handed over on a pipe (platform/keyhandoff.py), so no
command it starts can read the key from its parent; the short calls this door serves skip it.

Module level imports only `os`, `sys` and lean tillage modules (no dataclasses, no typing: each
costs more than a round trip); the socket (`_socket`), the JSON scanner (`_json`)
and base64 (`binascii`) are their C modules, imported when a socket exists: `socket`, `json`
and `base64` themselves would cost more than a whole round trip.
"""

from __future__ import annotations

import os
import sys

from tillage.hosts.cli.where import (
    absolute,
    command_of,
    command_word,
    expand_user,
    repo_arg,
    socket_path,
    store_home,
    workspace_id,
)
from tillage.platform import keyhandoff
from tillage.platform.identity import code_identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Commands worth a round trip: the ones an agent repeats, whose work is small next to start-up.
# `watch`, `forget` (they start and stop the watcher itself), `verify`, `cat` (long, or a
# stream of content), `events` (a stream), and `contracts`/`version`/`agents-md` (no store
# work to save) always run here.
SOCKET_COMMANDS = frozenset(
    {
        "status",
        "snap",
        "timeline",
        "show",
        "diff",
        "rewind",
        "pin",
        "unpin",
        "hook",
        "fork",
        "sessions",
        "session start",
        "session record",
        "session end",
        "session log",
        "session diff",
        "session changelog",
    }
)
# Command words that name a group of two-word commands (`session start`); a test keeps this
# equal to the groups in registry.COMMANDS.
GROUPS = frozenset({"session", "project", "remote", "coord", "op"})
# Of those, the commands whose contract reads a document on stdin (`stdin_param`); a test
# keeps this equal to the registry. Only their stdin is read and sent.
STDIN_COMMANDS = frozenset({"hook"})
# Words that keep a call of a command here whatever: `hook install` reads this process's PATH
# (which is not sent) and starts the watcher, and `hook uninstall` goes with it (a hook whose
# flag's value is one of these words runs here too, which only costs it the start-up).
LOCAL_WORDS = {"hook": frozenset({"install", "uninstall"})}
# The commands whose call waits for the watcher's `tillage.starting` for DOOR_TIMEOUT at most
# and then runs here instead (see above): an agent's hook must never wait on a hung watcher.
HANDSHAKE_COMMANDS = frozenset({"hook"})

# What the watcher's run of the command line sees of this process's environment: what the
# command line reads (the store, the user, the clock, colour, help width, the agent's name,
# the time zone for local times, PORT: the base of a new fork's port), nothing else. LANG/LC_*
# are sent though output is UTF-8 whatever the locale, so a later locale-aware renderer stays
# right.
ENV_NAMES = frozenset(
    {"HOME", "XDG_DATA_HOME", "NO_COLOR", "TERM", "COLUMNS", "TZ", "LANG", "PORT"}
)
ENV_PREFIXES = ("TILLAGE_", "LC_")

# Seconds to connect and for the watcher to prove it answers, before the command is sent (and,
# for a hook, again for its `tillage.starting`): a watcher answers a ping in about a
# millisecond (2 ms at most in 300 pings on the 2-core VM at load 3), and one slower than this
# is not worth waiting for: the local door gives the same answer.
DOOR_TIMEOUT = 0.15
# What names the recovery key in the environment (platform/launch.is_secret, which imports
# dataclasses; a test keeps the two equal): never sent to the watcher.
SECRET_PREFIX = keyhandoff.VARIABLE
SUN_PATH_MAX = 107  # bytes of a Unix socket path


class _Terminated(KeyboardInterrupt):
    """SIGTERM while waiting for the watcher, answered as the local command line would."""


class _NoDoorError(Exception):
    """The socket cannot answer this call; nothing was printed, run it here (with the stdin
    already read, if any). `silent`: the watcher did not answer in time (hung or stopped), so
    nothing here should ask it anything again."""

    def __init__(self, stdin: bytes | None = None, *, silent: bool = False) -> None:
        super().__init__()
        self.stdin = stdin
        self.silent = silent


def main() -> int:
    """Runs `till`: through the watcher's socket when it may, else in this process (after
    running itself again when it holds the recovery key in argv or environ, so that nothing
    it starts can read the key from it: platform/keyhandoff.py)."""
    argv = sys.argv[1:]
    keyhandoff.receive()
    _hand_over_key(argv)
    door = _door(argv)
    read = None
    if door is not None:
        try:
            return _through(door[0], argv)
        except _NoDoorError as exc:
            read = exc.stdin
            if exc.silent:
                from tillage.workspace.watchstate import distrust

                distrust(door[1])
    from tillage.hosts.cli.main import main as local

    return local(stdin=read)


def _hand_over_key(argv: list[str]) -> None:
    """Re-executes this process with the key (and its file's path) out of its argv and environ
    when it holds one and is not one of the short calls that run no command (SOCKET_COMMANDS
    without `--`):
    those keep their start-up, every other command pays one more (a long-lived server, a
    command runner, or a verb that takes the key)."""
    found = keyhandoff.held(argv, os.environ)
    if not found:
        return
    if command_of(argv, GROUPS) in SOCKET_COMMANDS and "--" not in argv:
        return
    keyhandoff.reexec(argv, found)


def _door(argv: list[str]) -> tuple[str, str] | None:
    """The watcher's socket path and the workspace's ID when this call may go through it,
    else None."""
    command = command_of(argv, GROUPS)
    if command not in SOCKET_COMMANDS:
        return None
    if not LOCAL_WORDS.get(command, frozenset()).isdisjoint(argv):
        return None
    for word in argv:
        if word in ("-h", "--help", "--debug") or word == "--":
            return None
    if os.isatty(0) or os.isatty(1) or os.isatty(2):
        return None
    try:
        cwd = os.getcwd()
        env = os.environ
        repo = repo_arg(argv)
        start = absolute(expand_user(repo, env), cwd) if repo else cwd
        wid = workspace_id(start)
        if wid is None:
            return None
        return socket_path(store_home(env, cwd), wid), wid
    except (OSError, RuntimeError, ValueError):
        return None


def forwarded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of the environment the watcher's run of the command line needs (never the
    recovery key, nor the file naming it: none of these commands takes one)."""
    return {
        k: v
        for k, v in env.items()
        if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and not k.startswith(SECRET_PREFIX)
    }


def _through(path: str, argv: list[str]) -> int:
    """Runs the call through the watcher at `path` and prints its answer; _NoDoorError when it
    cannot (before anything is printed)."""
    import _socket

    try:
        conn = _connect(_socket, path)
    except OSError as exc:
        raise _NoDoorError(silent=isinstance(exc, TimeoutError)) from None
    data = None
    handshake = command_word(argv) in HANDSHAKE_COMMANDS
    try:
        try:
            conn.settimeout(DOOR_TIMEOUT)
            pong = _call(conn, 1, "tillage.ping", "{}")
            if pong.get("code") != code_identity():
                raise ValueError("a watcher of another tillage install")
            if command_word(argv) in STDIN_COMMANDS:
                from tillage.hosts.cli.payload import read_fd

                data = read_fd(0)
            cwd = os.getcwd()
            params = (
                '{"argv":'
                + _list(argv)
                + ',"cwd":'
                + _str(cwd)
                + ',"env":'
                + _map(forwarded_env(os.environ))
                + ',"stdin_b64":'
                + (_b64(data) if data is not None else "null")
                + (',"handshake":true' if handshake else "")
                + "}"
            )
            if not handshake:
                conn.settimeout(None)  # the watcher answers; the command takes what it takes
            previous = _on_sigterm()
            try:
                _send(conn, 2, "tillage.cli", params)
                reply = _json_load(_read_line(conn))
                if handshake and _is_starting(reply, 2):
                    # The watcher runs it once told to go: from here, it is the watcher's.
                    conn.settimeout(None)
                    _send(conn, None, "tillage.go", '{"id":2}')
                    reply = _json_load(_read_line(conn))
                result = _result(reply, 2)
            finally:
                _restore_sigterm(previous)
        except TimeoutError:  # before the watcher took the command: it never runs it
            raise _NoDoorError(data, silent=True) from None
        except Exception:  # no answer, or not one this door understands: nothing printed
            raise _NoDoorError(data) from None
        except KeyboardInterrupt as exc:
            return _interrupted(argv, terminated=isinstance(exc, _Terminated))
    finally:
        conn.close()
    try:
        code, out, err = _answer(result)
    except Exception:
        raise _NoDoorError(data) from None
    return _print(code, out, err)


def _connect(_socket: Any, path: str) -> Any:
    """A connected stream socket; a path too long for `sun_path` goes through its folder's
    descriptor (/proc/self/fd/N/NAME), as the watcher binds it."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(DOOR_TIMEOUT)
        if len(os.fsencode(path)) <= SUN_PATH_MAX:
            conn.connect(path)
        else:
            folder, name = os.path.split(path)
            fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                conn.connect(f"/proc/self/fd/{fd}/{name}")
            finally:
                os.close(fd)
    except BaseException:
        conn.close()
        raise
    return conn


def _call(conn: Any, rid: int, method: str, params: str) -> Any:
    """Sends one JSON-RPC request and returns its result; ValueError for an error reply or
    anything that is not the answer to it."""
    _send(conn, rid, method, params)
    return _result(_json_load(_read_line(conn)), rid)


def _send(conn: Any, rid: int | None, method: str, params: str) -> None:
    """Sends one JSON-RPC request (a notification when `rid` is None)."""
    ident = "" if rid is None else f'"id":{rid},'
    line = f'{{"jsonrpc":"2.0",{ident}"method":{_str(method)},"params":{params}}}\n'
    conn.sendall(line.encode("utf-8", "surrogatepass"))


def _result(reply: Any, rid: int) -> Any:
    """The result of the reply to request `rid`; ValueError for anything else."""
    if not isinstance(reply, dict) or reply.get("id") != rid or "result" not in reply:
        raise ValueError("not the answer")
    return reply["result"]


def _is_starting(reply: Any, rid: int) -> bool:
    """Whether a line is the watcher's notice that it is about to run request `rid`."""
    if not isinstance(reply, dict) or reply.get("method") != "tillage.starting":
        return False
    params = reply.get("params")
    return isinstance(params, dict) and params.get("id") == rid


def _read_line(conn: Any) -> str:
    chunks = []
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise ValueError("the watcher closed the connection")
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks).decode("utf-8")
        chunks.append(chunk)


def _answer(result: Any) -> tuple[int, bytes, bytes]:
    import binascii

    code = result["exit"]
    if type(code) is not int or not 0 <= code <= 255:
        raise ValueError("not an exit status")
    out = binascii.a2b_base64(result["stdout_b64"].encode("ascii"))
    err = binascii.a2b_base64(result["stderr_b64"].encode("ascii"))
    return code, out, err


def _print(code: int, out: bytes, err: bytes) -> int:
    """Writes the answer to this process's stdout and stderr; a reader that went away ends
    the call quietly with 141, as the local command line does."""
    try:
        _write_all(1, out)
        _write_all(2, err)
    except BrokenPipeError:
        return 141
    return code


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _interrupted(argv: list[str], *, terminated: bool) -> int:
    """Prints what the local command line prints when interrupted. The watcher still finishes
    the command it was given (a thread cannot be interrupted safely); like a local command
    cut short, it leaves nothing half-done."""
    from tillage.hosts.cli.main import interrupted_output

    own = argv[: argv.index("--")] if "--" in argv else argv
    code, out, err = interrupted_output("--json" in own, terminated=terminated)
    return _print(code, out, err)


def _on_sigterm() -> Any:
    def handler(_signum: int, _frame: Any) -> None:
        raise _Terminated

    return _restore_sigterm(handler)


def _restore_sigterm(handler: Any) -> Any:
    """Sets SIGTERM's handler and returns the one it replaces."""
    import _signal  # type: ignore[import-not-found]  # `signal` itself imports enum: 4 ms

    return _signal.signal(_signal.SIGTERM, handler)


# -- the little JSON this door needs, from the C halves of the json module ------------------


def _str(text: str) -> str:
    import _json

    return _json.encode_basestring_ascii(text)


def _list(items: list[str]) -> str:
    return "[" + ",".join(_str(s) for s in items) + "]"


def _map(values: Mapping[str, str]) -> str:
    return "{" + ",".join(_str(k) + ":" + _str(v) for k, v in values.items()) + "}"


def _b64(data: bytes) -> str:
    import binascii

    return '"' + binascii.b2a_base64(data, newline=False).decode("ascii") + '"'


class _Scanning:
    """What the C scanner of `json` asks of its decoder: strict, with plain types."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")


def _json_load(text: str) -> Any:
    """One JSON document; ValueError for anything else."""
    import _json

    context: Any = _Scanning
    scan = _json.make_scanner(context)
    try:
        value, end = scan(text, 0)
    except Exception:  # StopIteration, or the scanner's own complaint about the text
        raise ValueError("not JSON") from None
    if text[end:].strip():
        raise ValueError("trailing data")
    return value
