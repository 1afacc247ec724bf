"""The argument parser of `till`, derived from the verb registry: every verb's subcommand, flags
and help come from its contract. It prints to the call's streams and never exits the process:
argparse's complaints and exits come back as exceptions the host turns into its envelope."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


class ArgparseError(Exception):
    """argparse's complaint, raised instead of exiting so the host controls the envelope."""


class ParserExitError(Exception):
    """argparse's exit (after `--help`), raised instead of exiting the process."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class Parser(argparse.ArgumentParser):
    """An argument parser that prints to the call's streams and never exits the process."""

    def __init__(
        self, *args: Any, out: Any = None, width: int = 100, page: Any = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("formatter_class", _formatter(width))
        super().__init__(*args, **kwargs)
        self.out = out
        self.page = page  # the whole help text, when it is written rather than derived

    def error(self, message: str) -> NoReturn:
        raise ArgparseError(f"{self.prog}: {message}")

    def print_help(self, file: Any = None) -> None:
        if self.page is None:
            super().print_help(file if file is not None else self.out)
        else:
            (file if file is not None else self.out).write(self.page())

    def print_usage(self, file: Any = None) -> None:
        super().print_usage(file if file is not None else self.out)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ParserExitError(status)


def _formatter(width: int) -> Any:
    """A help formatter of a fixed width (from the caller's COLUMNS, else 100), so building a
    parser never asks a terminal."""

    def make(prog: str) -> argparse.HelpFormatter:
        return _Formatter(prog, width=width)

    return make


class _Formatter(argparse.HelpFormatter):
    """Wraps a description to the width, but keeps an epilog's lines (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return text
        return super()._fill_text(text, width, indent)


def _global_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--repo", metavar="PATH", default=default, help="the workspace folder (default: here)"
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print nothing on success but a command's content; errors still print",
    )
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


def build_parser(only: Any = None, *, out: Any = None, width: int = 100) -> Parser:
    """Builds the argument parser from the verb registry (just `only`'s subcommand if given);
    `--help` prints to `out`, `width` columns wide."""
    from tillage.hosts.cli.help import epilog, top_help
    from tillage.verbs.registry import all_verbs

    formatter = _formatter(width)
    verbs = [only] if only is not None else list(all_verbs())
    docs = {v.contract.cli: v.contract.doc for v in verbs}
    root = Parser(
        prog="till",
        description="Seal, rewind and fork whole workspaces.",
        out=out,
        formatter_class=formatter,
        page=lambda: top_help(docs, width=width),
    )
    _global_flags(root, suppress=False)
    root.add_argument("--version", action="store_true", help="print the version and exit")
    sub = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    groups: dict[str, Any] = {}
    for verb in verbs:
        c = verb.contract
        head, _, tail = c.cli.partition(" ")
        if tail:  # a two-word command (`session start`): a subcommand of its group's parser
            if head not in groups:
                groups[head] = _group(sub, head, verbs, out, formatter)
            where = groups[head]
        else:
            where, tail = sub, c.cli
        p = where.add_parser(
            tail,
            help=c.doc,
            description=c.doc,
            epilog=epilog(c.cli),
            out=out,
            formatter_class=formatter,
        )
        _global_flags(p, suppress=True)
        for prm in c.params():
            _add_param(p, prm)
        remainder = [prm for prm in c.params() if prm.spec.remainder]
        if remainder:
            # The command after `--` is split off before parsing (_split_command); the usage
            # line still shows where it goes, in brackets when it may be left out.
            tail = "[-- CMD ...]" if remainder[0].optional else "-- CMD ..."
            p.usage = p.format_usage().removeprefix("usage: ").rstrip() + " " + tail
    return root


def _group(sub: Any, head: str, verbs: list[Any], out: Any, formatter: Any) -> Any:
    """The parser of a group of two-word commands (`till session start`): its subcommands,
    each a verb; `till session` alone or with an unknown word is a usage error."""
    tails = [
        v.contract.cli.partition(" ")[2] for v in verbs if v.contract.cli.startswith(head + " ")
    ]
    text = f"{head} commands: {', '.join(tails)} (`till {head} SUBCOMMAND --help`)"
    parser = sub.add_parser(head, help=text, description=text, out=out, formatter_class=formatter)
    _global_flags(parser, suppress=True)
    return parser.add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND", parser_class=Parser, required=True
    )


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
    elif "float" in prm.type.split(" | "):
        kwargs["type"] = float
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    if spec.remainder:
        return  # the words after `--`, split off before parsing (_split_command)
    if spec.or_positional:  # the same value as a positional word after the others
        p.add_argument(
            _positional_dest(prm.name),
            nargs="?",
            default=None,
            metavar=prm.name.upper(),
            help=f"the same as --{prm.name.replace('_', '-')}, as a second word",
        )
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
    elif prm.default not in (None, False, ()) and "default:" not in prm.doc:
        kwargs["help"] = f"{prm.doc} (default: {prm.default})"
    p.add_argument(*names, **kwargs)


def parse_words(
    parser: argparse.ArgumentParser, argv: Sequence[str], verb: Any
) -> argparse.Namespace:
    """`parser.parse_args(argv)`, with an optional positional word allowed after a flag
    (`till ls head -l src`, as git and restic take it): argparse fills the positionals that
    stand together in one go, so a later one would be "unrecognized"; such words fill the
    positionals still empty, in their order."""
    ns, extras = parser.parse_known_args(argv)
    if extras and verb is not None:
        empty = [
            name
            for name, default in _positionals(verb.contract)
            if getattr(ns, name, None) == default
        ]
        while extras and empty and not extras[0].startswith("-"):
            setattr(ns, empty.pop(0), extras.pop(0))
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return ns


def _positionals(contract: Any) -> list[tuple[str, Any]]:
    """(namespace name, default) of each optional positional, in the order they are added."""
    found: list[tuple[str, Any]] = []
    for prm in contract.params():
        if prm.spec.remainder:
            continue
        if prm.spec.or_positional:
            found.append((_positional_dest(prm.name), None))
        words = set(prm.type.split(" | ")) <= {"string", "null"}  # taken as typed
        if prm.spec.positional and prm.optional and words:
            found.append((prm.name, prm.default))
    return found


def _positional_dest(name: str) -> str:
    return f"{name}__positional"


def fold_positionals(ns: argparse.Namespace, contract: Any) -> None:
    """Moves a flag's value given as a positional word (ParamSpec.or_positional) to the flag;
    given both ways, it is a usage error."""
    for prm in contract.params():
        if not prm.spec.or_positional:
            continue
        word = getattr(ns, _positional_dest(prm.name), None)
        if word is None:
            continue
        flag = "--" + prm.name.replace("_", "-")
        if getattr(ns, prm.name) != prm.default:
            raise ArgparseError(f"till {contract.cli}: give {flag} or a second word, not both")
        setattr(ns, prm.name, word)
