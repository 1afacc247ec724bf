"""The recovery key (or the path of its file) handed from a `till` process to its own
re-execution, so that no process a user command can see holds either in its argv or its
environment.

A process's /proc/PID/cmdline and /proc/PID/environ are fixed at exec and readable by every
process of the same user: a command `till work` runs could read `--key HEX` or
TILLAGE_RECOVERY_KEY from its parent, or the key file `--key-file` or
TILLAGE_RECOVERY_KEY_FILE names. So a `till` given any of them re-executes itself first thing
(same pid), with those flags' values replaced by HIDDEN and the variables removed, and what
they held written to a pipe it inherits (its descriptor in FD_VARIABLE); the new process reads
the pipe, closes it and forgets the variable before anything else runs. What was handed over
then lives in that process's memory only, where `handed()` gives it to the verbs.

Light on purpose (`os` and `sys` alone): the console script consults it at every start-up.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# Where a key may be given, by the name it is handed over under.
FLAGS = {"--key": "key", "--key-file": "key_file"}
VARIABLES = {"TILLAGE_RECOVERY_KEY": "env", "TILLAGE_RECOVERY_KEY_FILE": "env_file"}
VARIABLE = "TILLAGE_RECOVERY_KEY"
FD_VARIABLE = "TILLAGE_RECOVERY_KEY_FD"
# What a flag reads in argv once its value was handed over (never a key, never a path).
HIDDEN = "<handed-over>"
_MAGIC = b"tillage-key-handoff-2\0"
_LIMIT = 4096  # characters of one value handed over: a key is 64, a path is shorter

# What this process was handed, by origin (FLAGS' and VARIABLES' values).
_HANDED: dict[str, str] = {}


def _flag_of(word: str) -> str | None:
    """The key flag `word` spells (argparse takes a unique prefix: `--key-f` is --key-file;
    `--k` and `--ke` are ambiguous, refused before any command runs), or None."""
    if word == "--key":
        return word
    if len(word) > len("--key-") and "--key-file".startswith(word):
        return "--key-file"
    return None


def held(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """What this command line holds of the key, by origin: `--key`/`--key-file`'s values
    (`--flag V` or `--flag=V`, before `--`; the words after it are a user's command) and the
    variables; empty when nothing."""
    found: dict[str, str] = {}
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        flag = _flag_of(name)
        if flag is None:
            continue
        if not eq:
            if i + 1 >= len(words):
                continue
            value = words[i + 1]
        if value != HIDDEN:
            found[FLAGS[flag]] = value
    for variable, origin in VARIABLES.items():
        if variable in env:
            found[origin] = env[variable]
    return found


def scrubbed(argv: Sequence[str]) -> list[str]:
    """`argv` with every key flag's value before `--` replaced by HIDDEN (the words after `--`
    are a user's command, passed on untouched)."""
    end = argv.index("--") if "--" in argv else len(argv)
    out = list(argv)
    for i in range(end):
        name, eq, _value = out[i].partition("=")
        if _flag_of(name) is None:
            continue
        if eq:
            out[i] = f"{name}={HIDDEN}"
        elif i + 1 < end:
            out[i + 1] = HIDDEN
    return out


def _pack(found: Mapping[str, str]) -> bytes:
    return _MAGIC + b"\0".join(
        f"{origin}={value[:_LIMIT]}".encode("utf-8", "surrogateescape").replace(b"\0", b"")
        for origin, value in found.items()
    )


def _unpack(data: bytes) -> dict[str, str]:
    if not data.startswith(_MAGIC):
        return {}
    origins = set(FLAGS.values()) | set(VARIABLES.values())
    out: dict[str, str] = {}
    for item in data[len(_MAGIC) :].split(b"\0"):
        origin, eq, value = item.decode("utf-8", "surrogateescape").partition("=")
        if eq and origin in origins:
            out[origin] = value
    return out


def reexec(argv: Sequence[str], found: Mapping[str, str]) -> None:
    """Replaces this process (same pid) with `till` run again on `argv` scrubbed, without the
    key's variables in its environment, `found` handed over on an inherited pipe. Returns only
    when the interpreter cannot be run again (this process goes on as it is)."""
    interpreter = _interpreter()
    if interpreter is None:
        return
    path, lead = interpreter
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, _pack(found))  # far below a pipe's buffer: never blocks
    finally:
        os.close(write_fd)
    if read_fd <= 2:  # this process was started with stdin/stdout/stderr closed
        import fcntl

        moved = fcntl.fcntl(read_fd, fcntl.F_DUPFD, 3)
        os.close(read_fd)  # the standard descriptor stays closed, as it was given
        read_fd = moved
    os.set_inheritable(read_fd, True)
    gone = {v.encode() for v in VARIABLES}
    env = {k: v for k, v in os.environb.items() if k not in gone}
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
    """In a process started by reexec: reads what was handed over from the inherited pipe,
    closes it and removes FD_VARIABLE from the environment, so what this process starts
    inherits neither. Anything but a pipe holding a handoff is ignored (the variable is still
    removed): a stray number, stdin included, is never read."""
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
    _HANDED.clear()
    _HANDED.update(_unpack(b"".join(chunks)))


def handed(origin: str) -> str | None:
    """What this process was handed by its previous self under `origin` (`key`, `key_file`:
    the flags' values; `env`, `env_file`: the variables'); None when nothing was."""
    return _HANDED.get(origin)
