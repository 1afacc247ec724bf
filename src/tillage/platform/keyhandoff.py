"""The recovery key handed from a `till` process to its own re-execution, so that no process a
user command can see holds the key in its argv or its environment.

A process's /proc/PID/cmdline and /proc/PID/environ are fixed at exec and readable by every
process of the same user: a command `till work` runs could read `--key HEX` or
TILLAGE_RECOVERY_KEY from its parent. So a `till` given the key that way re-executes itself
first thing (same pid), with `--key`'s value replaced by HIDDEN and the variable removed, and
the key written to a pipe it inherits (its descriptor in FD_VARIABLE); the new process reads
the pipe, closes it and forgets the variable before anything else runs. The key then lives in
that process's memory only, where `handed()` gives it to the verbs that take one.

Light on purpose (`os` and `sys` alone): the console script consults it at every start-up.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

FLAG = "--key"
VARIABLE = "TILLAGE_RECOVERY_KEY"
FD_VARIABLE = "TILLAGE_RECOVERY_KEY_FD"
# What `--key` reads in argv once its value was handed over (never a valid key).
HIDDEN = "<handed-over>"
_MAGIC = b"tillage-key-handoff-1\0"
_LIMIT = 4096  # characters of one value handed over: a key is 64, anything longer is no key

# What this process was handed: {"argv": ..., "env": ...} (the origins that were given).
_HANDED: dict[str, str] = {}


def held(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None] | None:
    """The key this command line holds in its argv (`--key HEX`, `--key=HEX`, before `--`) and
    in its environment (TILLAGE_RECOVERY_KEY), or None when it holds neither."""
    given = None
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    for i, word in enumerate(words):
        if word == FLAG and i + 1 < len(words) and words[i + 1] != HIDDEN:
            given = words[i + 1]
        elif word.startswith(FLAG + "=") and word[len(FLAG) + 1 :] != HIDDEN:
            given = word[len(FLAG) + 1 :]
    exported = env.get(VARIABLE)
    if given is None and exported is None:
        return None
    return given, exported


def scrubbed(argv: Sequence[str]) -> list[str]:
    """`argv` with every `--key` value before `--` replaced by HIDDEN (the words after `--`
    are a user's command, passed on untouched)."""
    end = argv.index("--") if "--" in argv else len(argv)
    out = list(argv)
    for i in range(end):
        if out[i] == FLAG and i + 1 < end:
            out[i + 1] = HIDDEN
        elif out[i].startswith(FLAG + "="):
            out[i] = f"{FLAG}={HIDDEN}"
    return out


def _pack(given: str | None, exported: str | None) -> bytes:
    def one(value: str | None) -> bytes:
        if value is None:
            return b"-"
        return b"+" + value[:_LIMIT].encode("utf-8", "surrogateescape").replace(b"\0", b"")

    return _MAGIC + one(given) + b"\0" + one(exported)


def _unpack(data: bytes) -> tuple[str | None, str | None]:
    if not data.startswith(_MAGIC) or data.count(b"\0", len(_MAGIC)) != 1:
        return None, None
    first, second = data[len(_MAGIC) :].split(b"\0")

    def one(raw: bytes) -> str | None:
        return raw[1:].decode("utf-8", "surrogateescape") if raw.startswith(b"+") else None

    return one(first), one(second)


def reexec(argv: Sequence[str], given: str | None, exported: str | None) -> None:
    """Replaces this process (same pid) with `till` run again on `argv` scrubbed, without
    TILLAGE_RECOVERY_KEY in its environment, the key handed over on an inherited pipe.
    Returns only when the interpreter cannot be run again (this process goes on as it is)."""
    found = _interpreter()
    if found is None:
        return
    path, lead = found
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, _pack(given, exported))  # far below a pipe's buffer: never blocks
    finally:
        os.close(write_fd)
    os.set_inheritable(read_fd, True)
    env = {k: v for k, v in os.environb.items() if k != VARIABLE.encode()}
    env[FD_VARIABLE.encode()] = str(read_fd).encode()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    try:
        os.execve(path, [*lead, *scrubbed(argv)], env)
    except OSError:
        os.close(read_fd)


def _interpreter() -> tuple[str, list[str]] | None:
    """The interpreter's path and its own argv before the program's arguments: its name, its
    flags and what ran this program (`-m tillage`, or the console script)."""
    orig = list(getattr(sys, "orig_argv", ()) or ())
    lead = len(orig) - len(sys.argv) + 1
    if not sys.executable or not orig or lead < 1:
        return None
    return sys.executable, orig[:lead]


def receive() -> None:
    """In a process started by reexec: reads the key from the inherited pipe, closes it and
    removes FD_VARIABLE from the environment, so what this process starts inherits neither.
    Anything but a pipe holding a handoff is ignored (the variable is still removed)."""
    text = os.environ.pop(FD_VARIABLE, None)
    if text is None or not text.isdigit():
        return
    fd = int(text)
    if fd <= 2:
        return
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        os.set_blocking(fd, False)  # the whole handoff was written before the exec
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(fd)
    except OSError:
        return
    given, exported = _unpack(b"".join(chunks))
    _HANDED.clear()
    _HANDED.update({k: v for k, v in (("argv", given), ("env", exported)) if v is not None})


def handed() -> tuple[str | None, str | None]:
    """The key this process was handed by its previous self: (given as `--key`, exported as
    TILLAGE_RECOVERY_KEY); (None, None) when it was not re-executed."""
    return _HANDED.get("argv"), _HANDED.get("env")
