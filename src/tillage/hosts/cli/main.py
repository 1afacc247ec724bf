"""The `till` command: argv in, one verb invoked, one document out, one exit status.

Derived from the registry: every verb's subcommand, flags and help come from its contract. Only
this host reads argv, the environment and the terminal, and only it prints. Start-up is lean on
purpose (agents call this hundreds of times): feature code is imported by handlers when they run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_LANDED = 3


class _ArgparseError(Exception):
    """argparse's complaint, raised instead of exiting so the host controls the envelope."""


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _ArgparseError(f"{self.prog}: {message}")


class _Formatter(argparse.HelpFormatter):
    """A fixed width, so building a parser never imports shutil to ask the terminal."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        super().__init__(prog, width=int(columns) if columns.isdigit() else 100)


def _global_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--repo", metavar="PATH", default=default, help="the workspace folder")
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print exactly one JSON document on stdout",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show tracebacks of internal errors",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=argparse.SUPPRESS if suppress else "auto",
        help="colour human output: auto (a terminal without NO_COLOR), always or never",
    )


def build_parser(only: Any = None) -> Parser:
    """Builds the argument parser from the verb registry (just `only`'s subcommand if given)."""
    from tillage.verbs.registry import all_verbs

    root = Parser(prog="till", description="Seal, rewind and fork whole workspaces.")
    _global_flags(root, suppress=False)
    sub = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for verb in [only] if only is not None else all_verbs():
        c = verb.contract
        p = sub.add_parser(c.cli, help=c.doc, description=c.doc)
        _global_flags(p, suppress=True)
        for prm in c.params():
            _add_param(p, prm)
    return root


def _command_word(argv: list[str]) -> str | None:
    """Returns the first word that is not a global flag (or its value): the command."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--repo", "--color"):
            skip = True
        elif not word.startswith("-"):
            return word
        elif word == "--":
            return None
    return None


def _add_param(p: argparse.ArgumentParser, prm: Any) -> None:
    spec = prm.spec
    kwargs: dict[str, Any] = {"help": prm.doc, "dest": prm.name}
    is_list = prm.type.startswith("list[")
    if prm.type == "bool":
        kwargs["action"] = "store_true"
    elif is_list:
        kwargs["nargs"] = "+"
        kwargs["action"] = "extend"  # `--paths a --paths b` means both
    elif "int" in prm.type.split(" | "):
        kwargs["type"] = int
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    if spec.positional:
        del kwargs["dest"]
        if prm.optional:
            kwargs["nargs"] = "?"
            kwargs["default"] = prm.default
        p.add_argument(prm.name, **kwargs)
        return
    names = [spec.flag or "--" + prm.name.replace("_", "-"), *spec.aliases]
    if spec.short:
        names.insert(0, spec.short)
    kwargs["default"] = prm.default
    if not prm.optional:
        kwargs["required"] = True
    p.add_argument(*names, **kwargs)


def _home(env: dict[str, str]) -> Path:
    if env.get("TILLAGE_HOME"):
        return Path(env["TILLAGE_HOME"]).expanduser()
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "tillage"


def _user_home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:
        return None


def _streams(result: Any) -> bool:
    from tillage.verbs.wire import ByteStream

    return any(isinstance(v, ByteStream) for v in getattr(result, "__dict__", {}).values())


def _emit_json_streaming(result: Any) -> None:
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
    out = sys.stdout
    out.write(text[:-1])
    for n, (name, stream) in enumerate(streams):
        comma = "," if head or n else ""
        out.write(f'{comma}{json.dumps(name)}:"')
        for piece in stream.base64_pieces():
            out.write(piece)
        out.write('"')
    out.write("}\n")
    out.flush()


def _emit_lines(verb_name: str, items: Any, json_mode: bool, color: str, env: Any) -> int:
    """Prints a streaming result (`till events`) one line per item as it comes, flushed, so a
    reader sees each at once. An item of None means the verb is waiting: a reader that closed
    stdout is noticed then, not only at the next line (EPIPE ends the command quietly)."""
    import contextlib
    import select

    from tillage.hosts.cli.colour import Style, wanted
    from tillage.hosts.cli.human import line
    from tillage.verbs.wire import to_wire

    style = Style(wanted(color, is_tty=sys.stdout.isatty(), env=env, json_mode=json_mode))
    watch = select.poll()
    # POLLERR/POLLHUP come whatever the mask; a writer without a descriptor notices a closed
    # reader at the next line instead.
    with contextlib.suppress(AttributeError, OSError, ValueError):
        watch.register(sys.stdout.fileno(), 0)
    for item in items:
        if item is None:
            if any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in watch.poll(0)):
                raise BrokenPipeError
            continue
        if json_mode:
            _emit_json(to_wire(item))
        else:
            sys.stdout.write(line(verb_name, to_wire(item), style) + "\n")
            sys.stdout.flush()
    return EXIT_OK


def _emit_json(doc: Any) -> None:
    import json

    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A file name that is not UTF-8 (kept as lone surrogates): escape it as \udcXX so the
        # document stays valid UTF-8 JSON instead of carrying raw bytes.
        text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command and returns its exit status (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in args_list
    debug = "--debug" in args_list
    previous = _terminate_as_interrupt()
    try:
        code = _run(args_list, json_mode)
    except KeyboardInterrupt as exc:
        code = _interrupted(json_mode, terminated=isinstance(exc, _Terminated))
    except BrokenPipeError:
        code = _reader_went_away()
    except BaseException as exc:  # the last line of defence: no traceback without --debug
        if isinstance(exc, SystemExit):
            raise
        code = _internal(exc, json_mode=json_mode, debug=debug)
    finally:
        _restore_signal(previous)
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
    import signal

    def handler(_signum: int, _frame: Any) -> None:
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (the library calling main): leave signals alone
        return None


def _restore_signal(previous: Any) -> None:
    if previous is not None:
        import signal

        signal.signal(signal.SIGTERM, previous)


def _interrupted(json_mode: bool, *, terminated: bool) -> int:
    """Prints the `interrupted` envelope (CONTRACT: an interrupted command still prints one
    error document) and returns 130 for Ctrl-C, 143 for SIGTERM, as shells do."""
    from tillage.errors import CommandInterruptedError

    what = "terminated (SIGTERM)" if terminated else "interrupted (Ctrl-C)"
    err = CommandInterruptedError(f"the command was {what}")
    try:
        if json_mode:
            _emit_json({"error": err.envelope()})
        sys.stderr.write(f"till: {err.message} ({err.next})\n")
    except (OSError, ValueError):
        pass
    return 143 if terminated else 130


def _run(argv: list[str], json_mode: bool) -> int:
    from tillage.errors import TillageError
    from tillage.verbs.registry import verb_for_command

    word = _command_word(argv)
    only = verb_for_command(word) if word is not None else None
    try:
        parser = build_parser(only)
        ns = parser.parse_args(argv)
    except _ArgparseError as exc:
        return _usage(str(exc), json_mode)
    if not ns.command:
        if json_mode:
            return _usage("till: a COMMAND is required", json_mode)
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    verb = only
    assert verb is not None
    try:
        return _execute(verb, ns, json_mode)
    except TillageError as err:
        if json_mode:
            _emit_json({"error": err.envelope()})
        else:
            hint = f" ({err.next})" if err.next else ""
            from tillage.hosts.cli.units import printable

            line = f"till: {err.message}{hint} [{err.name} {err.code}]"
            sys.stderr.write(printable(line) + "\n")  # an echoed name cannot drive the terminal
        return EXIT_ERROR


def _execute(verb: Any, ns: argparse.Namespace, json_mode: bool) -> int:
    from tillage.verbs.contract import decode_request
    from tillage.verbs.invoke import Settings, invoke
    from tillage.verbs.wire import to_wire

    env = dict(os.environ)
    folder = Path(ns.repo).expanduser() if ns.repo else _current_folder()
    settings = Settings(
        home=_home(env),
        folder=folder.absolute(),
        agent=env.get("TILLAGE_AGENT") or None,
        debug=bool(ns.debug),
        user_home=_user_home(),
    )
    values = {p.name: getattr(ns, p.name) for p in verb.contract.params()}
    request = decode_request(verb.contract, values)
    interactive = not json_mode and sys.stdin.isatty() and sys.stderr.isatty()
    confirm = _prompter(verb.contract.name, env, ns.color) if interactive else None
    progress = _progress_printer() if (not json_mode and sys.stderr.isatty()) else None
    try:
        result = invoke(verb, settings, request, confirm=confirm, on_progress=progress)
    finally:
        if progress is not None:
            progress.finish()  # end the progress line before any answer or error is printed
    if callable(getattr(result, "stream", None)):
        return _emit_lines(verb.contract.name, result.stream(), json_mode, ns.color, env)
    if json_mode and _streams(result):
        _emit_json_streaming(result)
        return EXIT_OK
    if not json_mode and verb.contract.raw_output:
        raw = verb.contract.raw_output(result)
        if hasattr(raw, "check"):
            raw.check()  # a damaged store is refused before a byte is printed
        if isinstance(raw, bytes):
            sys.stdout.buffer.write(raw)
        elif isinstance(raw, str):
            sys.stdout.write(raw)
        else:
            for piece in raw:  # a file's content, a piece at a time: memory stays bounded
                sys.stdout.buffer.write(piece)
        sys.stdout.flush()
        return EXIT_OK
    wire = to_wire(result)
    if json_mode:
        _emit_json(wire)
    else:
        from tillage.hosts.cli.colour import Style, wanted
        from tillage.hosts.cli.human import render

        colour = wanted(ns.color, is_tty=sys.stdout.isatty(), env=env, json_mode=json_mode)
        sys.stdout.write(render(verb.contract.name, wire, now=_now(env), style=Style(colour)))
    status = getattr(result, "exit_status", None)
    return int(status()) if callable(status) else EXIT_OK


def _current_folder() -> Path:
    try:
        return Path.cwd()
    except FileNotFoundError:
        from tillage.workspace.errors import FolderMissingError

        raise FolderMissingError(
            "the current folder no longer exists (it was deleted or moved)",
            next_step="cd into an existing folder, or give --repo; a deleted workspace's "
            "timeline is still in the store: recreate the folder and run `till watch` there",
        ) from None


def _now(env: dict[str, str]) -> float:
    """The time relative times are told against: `TILLAGE_NOW` when set, else the clock."""
    import time

    from tillage.hosts.cli.units import parse_now

    pinned = parse_now(env.get("TILLAGE_NOW", ""))
    return time.time() if pinned is None else pinned


def _prompter(verb_name: str, env: dict[str, str], choice: str) -> Any:
    """Asks a person at a terminal, after showing the preview as that verb's own page."""

    def prompt(preview: Any) -> bool:
        from tillage.hosts.cli.colour import Style, wanted
        from tillage.hosts.cli.human import render
        from tillage.verbs.wire import to_wire

        if preview is not None:
            colour = wanted(choice, is_tty=sys.stderr.isatty(), env=env, json_mode=False)
            page = render(
                verb_name, to_wire(preview), now=_now(env), style=Style(colour), footer=False
            )
            sys.stderr.write(page)
        sys.stderr.write("Proceed? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        return answer in ("y", "yes")

    return prompt


def _progress_printer() -> Any:
    from tillage.hosts.cli.progress import ProgressPrinter

    return ProgressPrinter(sys.stderr)


def _usage(message: str, json_mode: bool) -> int:
    from tillage.hosts.cli.errors import UsageError

    if json_mode:
        _emit_json({"error": UsageError(message).envelope()})
    sys.stderr.write(message + "\n")
    return EXIT_USAGE


def _internal(exc: BaseException, *, json_mode: bool, debug: bool) -> int:
    from tillage.errors import InternalError

    err = InternalError(f"internal error: {type(exc).__name__}: {exc}")
    if debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    if json_mode:
        _emit_json({"error": err.envelope()})
    else:
        sys.stderr.write(f"till: {err.message} [{err.name} {err.code}] ({err.next})\n")
    return EXIT_ERROR
