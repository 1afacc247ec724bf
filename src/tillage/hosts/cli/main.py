"""The `till` command: argv in, one verb invoked, one document out, one exit status.

Derived from the registry: every verb's subcommand, flags and help come from its contract. Only
this host reads argv, the environment and the terminal, and only it prints. Start-up is lean on
purpose (agents call this hundreds of times): feature code is imported by handlers when they run.

The whole command line is `run(argv, io)`: the working folder, the environment, stdin and the
two output streams come in `io`, so the same function answers for this process (`main`) and
for another one through the watcher's socket (`run_served`, in a thread per connection). No
process global is read or changed inside `run`.
"""

from __future__ import annotations

import _thread
import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tillage.hosts.cli.parser import (
    ArgparseError,
    ParserExitError,
    build_parser,
    fold_positionals,
    parse_words,
)
from tillage.hosts.cli.payload import ask_secret, read_payload, read_value
from tillage.hosts.cli.where import absolute, command_of, expand_user, store_home, user_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, BinaryIO


EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_LANDED = 3


class IO:
    """Everything a command line reads from or writes to its process, passed in explicitly.

    `stdin` is bytes (already read, as a served call sends it), a binary stream (this
    process's), or None (nothing). `stdout`/`stderr` are binary writers. The `*_tty` flags say
    which of them is a terminal: prompts, colour and progress follow them, never the streams.
    `cwd` is None when this process's working folder no longer exists.
    """

    __slots__ = (
        "cwd",
        "env",
        "own_process",
        "stderr",
        "stderr_tty",
        "stdin",
        "stdin_tty",
        "stdout",
        "stdout_tty",
    )

    def __init__(
        self,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        stdin: bytes | BinaryIO | None,
        stdout: BinaryIO,
        stderr: BinaryIO,
        stdin_tty: bool = False,
        stdout_tty: bool = False,
        stderr_tty: bool = False,
        own_process: bool = False,
    ) -> None:
        self.own_process = own_process
        self.cwd = cwd
        self.env = env
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.stdin_tty = stdin_tty
        self.stdout_tty = stdout_tty
        self.stderr_tty = stderr_tty


class _Text:
    """A text face on a binary writer, for what writes text (argparse, the renderer, tracebacks,
    the progress line). UTF-8 whatever the locale, so a served call and a local one print the
    same bytes; a name that is not UTF-8 goes out as its own bytes on stdout, escaped on
    stderr (as Python's own stderr does)."""

    __slots__ = ("eager", "errors", "raw")

    def __init__(self, raw: BinaryIO, errors: str, *, eager: bool = False) -> None:
        self.raw = raw
        self.errors = errors
        self.eager = eager  # flush every write (stderr: messages must not wait for exit)

    def write(self, text: str) -> int:
        self.raw.write(text.encode("utf-8", self.errors))
        if self.eager:
            self.raw.flush()
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()


class _Call:
    """One running command line: its io, its text streams and its mode."""

    __slots__ = ("err", "io", "json_mode", "out")

    def __init__(self, io: IO, json_mode: bool) -> None:
        self.io = io
        self.json_mode = json_mode
        self.out = _Text(io.stdout, "surrogateescape")
        self.err = _Text(io.stderr, "backslashreplace", eager=True)


def own_words(argv: list[str]) -> list[str]:
    """The words that are `till`'s own: those before `--` (after it comes a user command,
    whose `--json` is not ours)."""
    return argv[: argv.index("--")] if "--" in argv else argv


def _streams(result: Any) -> bool:
    from tillage.verbs.wire import ByteStream

    return any(isinstance(v, ByteStream) for v in getattr(result, "__dict__", {}).values())


def _emit_json_streaming(result: Any, call: _Call) -> None:
    """Prints a result that holds file content as one JSON document, the content's base64
    written a piece at a time, so `till --json cat` of a 1 GiB file holds no copy of it."""
    import dataclasses
    import json

    from tillage.verbs.wire import ByteStream, to_wire

    head = {}
    streams = []
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if isinstance(value, ByteStream):
            value.check()  # refuse before printing: half a document is no document
            streams.append((f.name, value))
        else:
            head[f.name] = to_wire(value)
    text = json.dumps(head, ensure_ascii=True, separators=(",", ":"))
    out = call.out
    out.write(text[:-1])
    for n, (name, stream) in enumerate(streams):
        comma = "," if head or n else ""
        out.write(f'{comma}{json.dumps(name)}:"')
        for piece in stream.base64_pieces():
            out.write(piece)
        out.write('"')
    out.write("}\n")
    out.flush()


def _emit_lines(verb_name: str, items: Any, call: _Call, color: str) -> int:
    """Prints a streaming result (`till events`) one line per item as it comes, flushed, so a
    reader sees each at once. An item of None means the verb is waiting: a reader that closed
    stdout is noticed then, not only at the next line (EPIPE ends the command quietly)."""
    import contextlib
    import select

    from tillage.hosts.cli.colour import Style, wanted
    from tillage.hosts.cli.human import line
    from tillage.verbs.wire import to_wire

    io = call.io
    wanted_colour = wanted(color, is_tty=io.stdout_tty, env=io.env, json_mode=call.json_mode)
    style = Style(wanted_colour)
    watch = select.poll()
    # POLLERR/POLLHUP come whatever the mask; a writer without a descriptor (a served call)
    # notices a closed reader at the next line instead.
    with contextlib.suppress(AttributeError, OSError, ValueError):
        watch.register(io.stdout.fileno(), 0)
    for item in items:
        if item is None:
            if any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in watch.poll(0)):
                raise BrokenPipeError
            continue
        if call.json_mode:
            _emit_json(to_wire(item), call)
        else:
            call.out.write(line(verb_name, to_wire(item), style) + "\n")
            call.out.flush()
    return EXIT_OK


def _emit_json(doc: Any, call: _Call) -> None:
    import json

    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A file name that is not UTF-8 (kept as lone surrogates): escape it as \udcXX so the
        # document stays valid UTF-8 JSON instead of carrying raw bytes.
        text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    call.out.write(text + "\n")
    call.out.flush()


def process_io() -> IO:
    """This process's folder, environment and standard streams, as `run` takes them."""
    try:
        cwd: str | None = os.getcwd()
    except FileNotFoundError:
        cwd = None  # the folder was deleted: only a command that needs it says so
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    return IO(
        cwd=cwd,
        env=os.environ,
        stdin=stdin.buffer if stdin is not None else None,
        stdout=stdout.buffer if stdout is not None else _null_writer(),
        stderr=stderr.buffer if stderr is not None else _null_writer(),
        stdin_tty=_isatty(stdin),
        stdout_tty=_isatty(stdout),
        stderr_tty=_isatty(stderr),
        own_process=True,
    )


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (OSError, ValueError):
        return False


def _null_writer() -> BinaryIO:
    return open(os.devnull, "wb")  # lives as long as the process


def main(argv: Sequence[str] | None = None, *, stdin: bytes | None = None) -> int:
    """Runs one command in this process and returns its exit status (the console script exits
    with it). SIGTERM is delivered like Ctrl-C, so the same clean-up and envelope follow.
    `stdin` is what the socket door already read from stdin before it fell back to here."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    previous = _terminate_as_interrupt()
    try:
        io = process_io()
        if stdin is not None:
            io.stdin = stdin
        return run(args_list, io)
    except BrokenPipeError:
        return _reader_went_away()
    finally:
        _restore_signal(previous)


class NotServableError(Exception):
    """This process cannot give the caller's answer (local times in another time zone, which
    is process-wide): the caller runs the command line itself."""


def run_served(
    argv: list[str], cwd: str, env: dict[str, str], stdin: bytes | None
) -> tuple[int, bytes, bytes]:
    """Runs a command line for another process (the watcher's `tillage.cli`) and returns
    (exit status, stdout bytes, stderr bytes): machine mode, as that process would have run it
    with no terminal (no prompt, no colour unless asked, no progress). Thread-safe: every call
    has its own streams, and nothing here touches process state. NotServableError when this
    process's time zone is not the caller's (nothing ran)."""
    import io as _io

    if env.get("TZ") != os.environ.get("TZ"):
        raise NotServableError("the caller's time zone is not this process's")
    from tillage.store.store import closing_stores_opened_here

    out, err = _io.BytesIO(), _io.BytesIO()
    served = IO(cwd=cwd, env=dict(env), stdin=stdin, stdout=out, stderr=err)
    # Once everything is printed, whatever the call opened is done with; the serving process
    # lives on, and an unclosed index keeps its WAL and descriptors until a gc pass.
    with closing_stores_opened_here():
        code = run(list(argv), served)
    return code, out.getvalue(), err.getvalue()


def run(argv: list[str], io: IO) -> int:
    """Runs one command line against `io` and returns its exit status; every answer, error
    and interruption is printed to `io`'s streams. A reader that closed stdout
    (BrokenPipeError) is left to the caller, which owns the process's descriptors."""
    own = own_words(argv)
    call = _Call(io, "--json" in own)
    _RUNNING.err = call.err
    try:
        code = _run(argv, call)
        call.out.flush()
    except KeyboardInterrupt as exc:
        code = _interrupted(call, terminated=isinstance(exc, _Terminated), stopped=exc)
    except BrokenPipeError:
        raise
    except BaseException as exc:  # the last line of defence: no traceback without --debug
        if isinstance(exc, SystemExit):
            raise
        code = _internal(exc, call, debug="--debug" in own)
    finally:
        _RUNNING.err = None
    return code


def _reader_went_away() -> int:
    """stdout's reader closed it (`till cat ... | head`): stop quietly, as `cat` does, with
    the status a shell gives a command killed by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush cannot fail again
    os.close(devnull)
    return 141


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so the same clean-up runs and the same envelope prints."""


def _terminate_as_interrupt() -> Any:
    def handler(_signum: int, _frame: Any) -> None:
        raise _Terminated

    try:
        return _sigterm(handler)
    except ValueError:  # not the main thread (the library calling main): leave signals alone
        return None


def _restore_signal(previous: Any) -> None:
    if previous is not None:
        _sigterm(previous)


def _sigterm(handler: Any) -> Any:
    """Sets SIGTERM's handler, returning the one it replaces (through `_signal`: `signal`
    itself builds enums at import, half a millisecond of every call)."""
    import _signal  # type: ignore[import-not-found]

    return _signal.signal(_signal.SIGTERM, handler)


def interrupted_output(json_mode: bool, *, terminated: bool) -> tuple[int, bytes, bytes]:
    """The `interrupted` answer (CONTRACT: an interrupted command still prints one error
    document): exit 130 for Ctrl-C, 143 for SIGTERM, as shells do. The socket door prints the
    same when it is interrupted while the watcher runs the command."""
    import io as _io

    out, err = _io.BytesIO(), _io.BytesIO()
    call = _Call(IO(cwd=None, env={}, stdin=None, stdout=out, stderr=err), json_mode)
    code = _interrupted(call, terminated=terminated)
    return code, out.getvalue(), err.getvalue()


def _interrupted(call: _Call, *, terminated: bool, stopped: BaseException | None = None) -> int:
    """Prints the `interrupted` envelope and returns 130 (Ctrl-C) or 143 (SIGTERM). What the
    command noted on the interruption `stopped` (errors.note_interruption: a try's snapshots,
    an exec's sealed universes) goes in its details and next step, and for people one line per
    universe kept on stderr."""
    from tillage.errors import CommandInterruptedError, interruption_note

    what = "terminated (SIGTERM)" if terminated else "interrupted (Ctrl-C)"
    note = interruption_note(stopped) if stopped is not None else None
    details, next_step = note if note is not None else (None, None)
    err = CommandInterruptedError(f"the command was {what}", next_step=next_step, details=details)
    try:
        if call.json_mode:
            _emit_json({"error": err.envelope()}, call)
        call.err.write(f"till: {err.message} ({short_ids(err.next)})\n")
        from tillage.hosts.cli.human_forks import kept_lines

        for line in kept_lines(details or {}):
            call.err.write(line)
    except (OSError, ValueError):
        pass
    return 143 if terminated else 130


def _harness_fed(verb: Any) -> bool:
    """A verb that takes a harness's document on stdin is run by harnesses (agent hooks), which
    read exit status 2 as "block the agent": its usage errors exit 1 instead."""
    return verb is not None and verb.contract.stdin_param is not None


def _run(argv: list[str], call: _Call) -> int:
    from tillage.errors import TillageError
    from tillage.verbs.registry import COMMANDS, verb_for_command

    groups = {c.partition(" ")[0] for c in COMMANDS if " " in c}
    word = command_of(argv, groups)
    if word is None and "--version" in own_words(argv):  # `till --version` is `till version`
        argv = [w for w in argv if w != "--version"] + ["version"]
        word = "version"
    if word == "help" and "help" not in COMMANDS:  # `till help [COMMAND]`, as git's
        at = argv.index("help")
        argv = [*argv[:at], *argv[at + 1 :], "--help"]
        word = command_of(argv, groups)
    only = verb_for_command(word) if word is not None else None
    if word is not None and only is None and word not in groups:
        return _usage(_unknown_command(word, COMMANDS), call, None)
    columns = call.io.env.get("COLUMNS", "")
    argv, command = _split_command(only, argv)
    try:
        parser = build_parser(only, out=call.out, width=int(columns) if columns.isdigit() else 100)
        ns = parse_words(parser, argv, only)
    except ArgparseError as exc:
        return _usage(_flag_hint(str(exc), only), call, only)
    except ParserExitError as exc:
        return exc.status
    if not ns.command:
        if call.json_mode:
            return _usage("till: a COMMAND is required", call, None)
        parser.print_help(call.err)
        return EXIT_USAGE
    verb = only
    assert verb is not None
    try:
        fold_positionals(ns, verb.contract)
    except ArgparseError as exc:
        return _usage(str(exc), call, verb)
    for prm in verb.contract.params():
        if prm.spec.remainder:
            setattr(ns, prm.name, command)
    try:
        with _clock_pinned(call.io):
            code = _execute(verb, ns, call)
    except TillageError as err:
        if call.json_mode:
            _emit_json({"error": err.envelope()}, call)
        else:
            hint = f" ({short_ids(err.next)})" if err.next else ""
            from tillage.hosts.cli.units import printable

            line = f"till: {err.message}{hint} [{err.name} {err.code}]"
            call.err.write(printable(line) + "\n")  # an echoed name cannot drive the terminal
        from tillage.errors import UsageError

        return EXIT_USAGE if isinstance(err, UsageError) and not _harness_fed(verb) else EXIT_ERROR
    if code == EXIT_USAGE and _harness_fed(verb):
        return EXIT_ERROR
    return code


def _execute(verb: Any, ns: argparse.Namespace, call: _Call) -> int:
    from tillage.platform.launch import Launch
    from tillage.verbs.contract import decode_request
    from tillage.verbs.invoke import Settings, invoke
    from tillage.verbs.wire import to_wire

    io = call.io
    env = io.env
    folder = _folder(ns.repo, io)
    home = user_home(env)
    interactive = not call.json_mode and io.stdin_tty and io.stderr_tty
    settings = Settings(
        home=Path(store_home(env, io.cwd or "/")),
        folder=folder,
        agent=env.get("TILLAGE_AGENT") or None,
        debug=bool(ns.debug),
        user_home=Path(home) if home is not None else None,
        own_process=io.own_process,
        launch=Launch(env=env, output=io.stderr if call.json_mode else io.stdout),
        env=env,
        ask_secret=ask_secret if interactive and io.own_process else None,
    )
    values = {p.name: getattr(ns, p.name) for p in verb.contract.params()}
    field = verb.contract.stdin_param
    if field is not None and values.get(field) is None and not io.stdin_tty:
        payload = read_payload(io.stdin)
        if payload:
            values[field] = payload
    wanted = verb.contract.stdin_value
    given = wanted is None or any(values.get(n) is not None for n in (wanted.field, *wanted.unless))
    if wanted is not None and not given and not io.stdin_tty:
        values[wanted.field] = read_value(io.stdin, wanted.limit + 1)
    request = decode_request(verb.contract, values)
    json_mode = call.json_mode
    confirm = _prompter(verb.contract.name, call, ns.color) if interactive else None
    quiet = bool(ns.quiet) and not json_mode  # -q: the document is the contract under --json
    progress = _progress_printer() if (not json_mode and io.stderr_tty and not quiet) else None
    try:
        result = invoke(verb, settings, request, confirm=confirm, on_progress=progress)
    finally:
        if progress is not None:
            progress.finish()  # end the progress line before any answer or error is printed
    if verb.contract.serves is not None and getattr(result, "serving", False):
        if not io.own_process:
            from tillage.errors import UnavailableError

            raise UnavailableError(f"`till {verb.contract.cli}` serves only in its own process")
        return _serve(verb.contract.serves, settings, result, call)
    if callable(getattr(result, "stream", None)):
        if getattr(result, "note", None) and not quiet:  # where the stream starts
            call.err.write(f"till: {result.note}\n")
        return _emit_lines(verb.contract.name, result.stream(), call, ns.color)
    if json_mode and _streams(result):
        _emit_json_streaming(result, call)
        return EXIT_OK
    if not json_mode and verb.contract.raw_output:
        raw = verb.contract.raw_output(result)
        if hasattr(raw, "check"):
            raw.check()  # a damaged store is refused before a byte is printed
        if isinstance(raw, bytes):
            io.stdout.write(raw)
        elif isinstance(raw, str):
            call.out.write(raw)
        else:
            for piece in raw:  # a file's content, a piece at a time: memory stays bounded
                io.stdout.write(piece)
        io.stdout.flush()
        return EXIT_OK
    wire = to_wire(result)
    status = getattr(result, "exit_status", None)
    code = int(status()) if callable(status) else EXIT_OK
    if json_mode:
        _emit_json(wire, call)
    elif not quiet or code != EXIT_OK:  # -q: a merge that landed nothing still says why
        from tillage.hosts.cli.colour import Style, wanted
        from tillage.hosts.cli.human import render

        colour = wanted(ns.color, is_tty=io.stdout_tty, env=env, json_mode=json_mode)
        call.out.write(render(verb.contract.name, wire, now=_now(env), style=Style(colour)))
    if verb.contract.after_reply is not None and io.own_process:
        call.out.flush()
        verb.contract.after_reply(settings, request, result)
    return code


def _serve(door: str, settings: Any, result: Any, call: Any) -> int:
    """Hands this process to another door (`till mcp`: an MCP server on stdio; `till
    remote-serve --stdio PATH`: the far side of an SSH remote; `till ui`: Mission Control on
    127.0.0.1, which prints only its URL): stdout is that door's from here on, so nothing else
    is printed."""
    if door == "mcp":
        from tillage.hosts.mcp.server import serve_stdio

        return serve_stdio(settings)
    if door == "web":
        from tillage.hosts.web.server import serve

        return serve(settings, result, out=call.out, json_mode=call.json_mode)
    if door == "remote":
        from tillage.remote.serve import serve_stdio as serve_remote

        return serve_remote(result.path)
    raise ValueError(f"no door called {door!r}")


def _split_command(verb: Any, argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """For a verb that runs a command (`till run NAME -- CMD ...`): `till`'s own words, and
    the command's (everything after the first `--`, passed on untouched)."""
    if verb is None or "--" not in argv:
        return argv, ()
    if not any(p.spec.remainder for p in verb.contract.params()):
        return argv, ()
    at = argv.index("--")
    return argv[:at], tuple(argv[at + 1 :])


def _folder(repo: str | None, io: IO) -> Path:
    """The folder the command is about: `--repo` (against the caller's folder), else the
    caller's folder; folder_missing when that was deleted."""
    if repo:
        expanded = expand_user(repo, io.env)
        if expanded.startswith("/"):
            return Path(expanded)
        if io.cwd is not None:
            return Path(absolute(expanded, io.cwd))
    elif io.cwd is not None:
        return Path(io.cwd)
    from tillage.workspace.errors import FolderMissingError

    raise FolderMissingError(
        "the current folder no longer exists (it was deleted or moved)",
        next_step="cd into an existing folder, or give --repo; a deleted workspace's "
        "timeline is still in the store: recreate the folder and run `till watch` there",
    )


def _clock_pinned(io: IO) -> Any:
    """`TILLAGE_NOW` pins the clock for seals, retention and gc: for the whole process when it
    is ours (the MCP server's and a seal's worker threads too), else for this served call's
    thread; a value that is no time is refused rather than silently ignored."""
    from tillage.platform import clock

    text = io.env.get("TILLAGE_NOW", "")
    ns = clock.parse_pin(text)
    if text.strip() and ns is None:
        from tillage.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"TILLAGE_NOW={text[:40]!r} is not a time",
            next_step="set it to epoch seconds or an ISO-8601 time, or unset it",
        )
    if io.own_process:
        clock.pin_process(ns)
    return clock.pinned(ns)


def _now(env: Mapping[str, str]) -> float:
    """The time relative times are told against: `TILLAGE_NOW` when set, else the clock."""
    import time

    from tillage.hosts.cli.units import parse_now

    pinned = parse_now(env.get("TILLAGE_NOW", ""))
    return time.time() if pinned is None else pinned


def _prompter(verb_name: str, call: _Call, choice: str) -> Any:
    """Asks a person at a terminal, after showing the preview as that verb's own page."""
    io = call.io

    def prompt(preview: Any) -> bool:
        from tillage.hosts.cli.colour import Style, wanted
        from tillage.hosts.cli.human import render
        from tillage.verbs.wire import to_wire

        if preview is not None:
            colour = wanted(choice, is_tty=io.stderr_tty, env=io.env, json_mode=False)
            page = render(
                verb_name, to_wire(preview), now=_now(io.env), style=Style(colour), footer=False
            )
            call.err.write(page)
        call.err.write("Proceed? [y/N] ")
        call.err.flush()
        stdin = io.stdin
        line = b"" if stdin is None or isinstance(stdin, bytes) else stdin.readline()
        answer = line.decode("utf-8", "replace").strip().lower()
        return answer in ("y", "yes")

    return prompt


# The stderr of the command line running on each thread, for the progress line.
_RUNNING = _thread._local()


def _progress_printer() -> Any:
    """The progress line for a person, on the running command's stderr (a seam tests replace
    to drive the clock)."""
    from tillage.hosts.cli.progress import ProgressPrinter

    stream: Any = getattr(_RUNNING, "err", None) or sys.stderr  # outside run: this process's
    return ProgressPrinter(stream)


def _flag_hint(message: str, verb: Any) -> str:
    """A mistyped flag's usage line, with the flag of this command it most likely meant."""
    from tillage.hosts.cli.help import flag_hint
    from tillage.verbs.completion import GLOBAL_FLAGS, flags_of

    own = [long for long, _s, _v, _d in flags_of(verb.contract)] if verb is not None else []
    return flag_hint(message, [*own, *GLOBAL_FLAGS, "--version"])


def _unknown_command(word: str, commands: Any) -> str:
    """The usage line for a command no verb answers, with the one it most likely meant."""
    from tillage.hosts.cli.help import did_you_mean

    head, _, tail = word.partition(" ")
    if tail:  # `till session strat`: one of that group's words
        tails = sorted(c.partition(" ")[2] for c in commands if c.startswith(head + " "))
        close = did_you_mean(tail, tails)
        if close:
            return f"till: no command {word!r}; did you mean `till {head} {close}`?"
        return f"till: no command {word!r}; `till {head}` takes {', '.join(tails)}"
    guess = did_you_mean(word, commands)
    hint = f"; did you mean `till {guess}`?" if guess else "; `till --help` lists them"
    return f"till: no command {word!r}{hint}"


def _usage(message: str, call: _Call, verb: Any) -> int:
    from tillage.hosts.cli.errors import UsageError

    if call.json_mode:
        _emit_json({"error": UsageError(message).envelope()}, call)
    call.err.write(message + "\n")
    return EXIT_ERROR if _harness_fed(verb) else EXIT_USAGE


def short_ids(text: str) -> str:
    """A next step as people read it: each whole snapshot ID in a command (between backticks)
    cut to its 12 characters, which every command takes; the JSON envelope keeps them whole."""
    if "`" not in text:
        return text
    parts = text.split("`")
    for i in range(1, len(parts), 2):  # the odd pieces are inside backticks
        words = parts[i].split(" ")
        parts[i] = " ".join(w[:12] if len(w) == 64 and set(w) <= _HEX else w for w in words)
    return "`".join(parts)


_HEX = frozenset("0123456789abcdef")


def _report() -> str:
    """How to report an internal error: which tillage it was, and what to send."""
    import platform

    from tillage.verbs.system import VERSION

    return (
        f"this is a bug in tillage {VERSION} (Python {platform.python_version()}): rerun the "
        "command with --debug for the traceback, and report it with `till version`'s output"
    )


def _internal(exc: BaseException, call: _Call, *, debug: bool) -> int:
    from tillage.errors import InternalError

    err = InternalError(f"internal error: {type(exc).__name__}: {exc}", next_step=_report())
    if debug:
        import traceback

        traceback.print_exception(exc, file=call.err)
    if call.json_mode:
        _emit_json({"error": err.envelope()}, call)
    else:
        call.err.write(f"till: {err.message} [{err.name} {err.code}] ({err.next})\n")
    return EXIT_ERROR
