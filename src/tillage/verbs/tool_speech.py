"""The command line's words said as tool calls, for a model: `till rewind ID --yes --paths .env`
becomes `call workspace_restore with {"snapshot": "ID", "paths": [".env"], "confirm": true}`.

A next step or an error is written once, for people, in the command line's spelling; a model
holding the tools may have no shell, and a `--yes` it cannot type is no next step. The
translation is derived from the registry, never a table: a command's words are parsed with the
verb's own params (flags, short flags, positionals, the command after `--`), and each request
field is the tool argument that fills it (`yes` is `confirm: true`). A command that is no tool
(`till watch`) is said to be a person's to run; a flag of the tool in prose (`leave --after
off`) is the argument's name. Pure: text in, text out.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.verbs.contract import Param, Verb
    from tillage.verbs.tool_defs import ToolDef

# What follows a command that no tool offers (the words a person types, marked theirs), and a
# flag no argument of the tool fills.
FOR_A_PERSON = "(for a person to run: no tool does it)"
PERSON = "have a person run"
NO_ARGUMENT = "(a command-line flag: no tool argument takes it)"
# The global flags of `till` (hosts/cli) that change nothing a tool says (`--repo` does).
_GLOBAL_BARE = ("--json", "--debug")
_BACKTICKED = re.compile(r"`(till [^`]*)`")
_BARE_COMMAND = re.compile(r"(?<![\w`/.\"'-])till (?=[a-z])")
_FLAG = re.compile(r"(?<![\w/.-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
_VALUED = re.compile(r"(?<![\w/.-])(--[a-z][a-z0-9-]*) (['\"])(.*?)\2")
_TICKED_FLAG = re.compile(r"`(--[a-z][a-z0-9-]*|-[a-zA-Z])((?: [^`]*)?)`")
_GLOBAL_FLAGS = ("--json", "--debug", "--repo", "--color")
_DASHES = re.compile(r"`-- ([^`]+)`|(?<![\w-])`--`(?![\w-])")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
_WHOLE_ID = re.compile(r"[0-9a-f]{64}")
_HEX_WORD = re.compile(r"(?<![0-9a-f])[0-9a-f]{6,63}(?![0-9a-f])")


class _UnsaidError(Exception):
    """Words the tools cannot say (a flag no tool argument fills, a global `--repo`)."""


@cache
def _verbs() -> dict[str, Verb[Any, Any]]:
    from tillage.verbs.registry import all_verbs

    return {v.contract.cli: v for v in all_verbs()}


@cache
def _tools() -> dict[str, ToolDef]:
    from tillage.verbs.tool_defs import tool_defs

    return {d.verb.contract.name: d for d in tool_defs()}


@cache
def _all_flags() -> frozenset[str]:
    """Every flag of `till` (its own and each verb's): words a tool call cannot say."""
    flags = set(_GLOBAL_FLAGS)
    for verb in _verbs().values():
        for prm in verb.contract.params():
            flags.add(prm.spec.flag or "--" + prm.name.replace("_", "-"))
            flags.update(prm.spec.aliases)
            if prm.spec.short:
                flags.add(prm.spec.short)
    return frozenset(flags)


def tool_of(verb: Verb[Any, Any]) -> ToolDef | None:
    """The tool offering `verb`, or None."""
    return _tools().get(verb.contract.name)


def parse(words: list[str]) -> tuple[Verb[Any, Any], dict[str, Any]]:
    """`till`'s words after `till` as the verb they name and the request fields they give,
    parsed by the verb's own params; _UnsaidError when they are not a command of this registry."""
    rest = list(words)
    own: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] != "--":
        word = rest.pop(0)
        if word in _GLOBAL_BARE:
            continue
        raise _UnsaidError(word)  # `--repo DIR`: a tool works on its own folder only
    verbs = _verbs()
    for size in (2, 1):
        if len(rest) >= size and " ".join(rest[:size]) in verbs:
            verb = verbs[" ".join(rest[:size])]
            own = rest[size:]
            break
    else:
        raise _UnsaidError(" ".join(rest[:2]))
    return verb, _fields(verb, own)


def _fields(verb: Verb[Any, Any], words: list[str]) -> dict[str, Any]:
    params = verb.contract.params()
    flags: dict[str, Param] = {}
    for prm in params:
        if prm.spec.positional or prm.spec.remainder:
            continue
        for name in (prm.spec.flag or "--" + prm.name.replace("_", "-"), *prm.spec.aliases):
            flags[name] = prm
        if prm.spec.short:
            flags[prm.spec.short] = prm
    positional = [p for p in params if p.spec.positional]
    remainder = next((p for p in params if p.spec.remainder), None)
    values: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            if remainder is None:
                raise _UnsaidError(word)
            values[remainder.name] = tuple(words[i:])
            break
        if word.startswith("-") and len(word) > 1:
            name, eq, inline = word.partition("=")
            if name in _GLOBAL_BARE:
                continue
            flagged = flags.get(name)
            if flagged is None:
                raise _UnsaidError(name)
            if flagged.type == "bool":
                values[flagged.name] = True
                continue
            taken = [inline] if eq else []
            while i < len(words) and not (words[i].startswith("-") and len(words[i]) > 1):
                taken.append(words[i])
                i += 1
                if not _listy(flagged) or eq:
                    break
            if not taken:
                raise _UnsaidError(name)
            values[flagged.name] = (
                (*values.get(flagged.name, ()), *taken) if _listy(flagged) else taken[0]
            )
            continue
        if not positional:
            raise _UnsaidError(word)
        prm = positional.pop(0)
        values[prm.name] = (word,) if _listy(prm) else word
    return {k: _typed(params, k, v) for k, v in values.items()}


def _listy(prm: Param) -> bool:
    return prm.type.startswith("list[")


def _typed(params: list[Param], name: str, value: Any) -> Any:
    prm = next(p for p in params if p.name == name)
    if "int" in prm.type.split(" | ") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value  # a placeholder (`--limit N`)
    return value


def tool_call(verb: Verb[Any, Any], fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool and the arguments that make the request `fields` of `verb`; _UnsaidError when no
    tool offers it, or a field given is one its tool does not take."""
    from tillage.verbs.tool_defs import CONFIRM

    tool = tool_of(verb)
    if tool is None:
        raise _UnsaidError(verb.contract.cli)
    by_field = {a.field: a for a in tool.args}
    fixed = dict(tool.fixed)
    args: dict[str, Any] = {}
    for name, value in fields.items():
        if tool.confirms and name == "yes":
            args[CONFIRM] = bool(value)
            continue
        if tool.confirms and name == "dry_run":
            continue  # a tool previews unless confirmed
        arg = by_field.get(name)
        if arg is None:
            if name in fixed and fixed[name] == value:
                continue
            raise _UnsaidError(name)
        if arg.command:
            args[arg.name] = value[0] if len(value) == 1 else shlex.join(value)
        else:
            args[arg.name] = list(value) if isinstance(value, tuple) else value
    return tool.name, args


def call_words(name: str, args: dict[str, Any]) -> str:
    """`workspace_restore with {"snapshot": ...}`: a call as a model makes it (placeholders
    such as NAME are shown as <NAME>)."""
    if not args:
        return name
    shown = {k: _placeholder(v) for k, v in args.items()}
    return f"{name} with {json.dumps(shown, ensure_ascii=False)}"


def _placeholder(value: Any) -> Any:
    if isinstance(value, str):
        words = value.split()
        if words and all(_PLACEHOLDER.fullmatch(w) or w == "..." for w in words):
            return f"<{words[0]}>"
        return value
    if isinstance(value, list):
        return [_placeholder(v) for v in value]
    return value


def _command(text: str) -> str | None:
    """`call TOOL with {...}` for the command line `text` (after `till`), or None when the
    tools cannot say it."""
    try:
        words = shlex.split(text)
        verb, fields = parse(words)
        return call_words(*tool_call(verb, fields))
    except (_UnsaidError, ValueError):
        return None


def speak(text: str, tool: ToolDef | None = None, known: tuple[str, ...] = ()) -> str:
    """`text` (a next step, an error's message) with each `till` command said as the tool call
    that does it (or marked a person's, when no tool does), each flag of `tool`'s verb as its
    argument, and each short ID that is a prefix of one of `known` written whole."""
    text = _commands(text)
    if tool is not None:
        text = _flags(text, tool)
    return expand_ids(text, known) if known else text


def _commands(text: str) -> str:
    """Each `till ...` command of `text`, backticked or not, said as its tool call (`call
    TOOL with {...}` where a clause starts, `a call of TOOL ...` within one), or marked as a
    person's to run when no tool does it."""
    pieces: list[str] = []
    at = 0
    for start, end, command in _mentions(text):
        before = text[:start]
        said = _command(command)
        if said is None and before.endswith("run "):
            before, words = before[:-4], f"{PERSON} `till {command}`"
        elif said is None:
            words = f"`till {command}` {FOR_A_PERSON}"
        elif before.endswith("run "):
            before, words = before[:-4], f"call {said}"
        else:
            words = f"a call of {said}" if _within(before) else f"call {said}"
        pieces.append(before[at:])
        pieces.append(words)
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _mentions(text: str) -> list[tuple[int, int, str]]:
    """Where `text` names a command of ours: (start, end, the words after `till`)."""
    found = [
        (m.start(), m.end(), m.group(1)[5:])
        for m in _BACKTICKED.finditer(text)
        # said already
        if not text[m.end() :].startswith(" " + FOR_A_PERSON)
        and not text[: m.start()].endswith(PERSON + " ")
    ]
    for match in _BARE_COMMAND.finditer(text):
        if _inside_backticks(text, match.start()):
            continue
        end = _clause_end(text, match.end())
        if _names_a_verb(text[match.end() : end]):
            found.append((match.start(), end, text[match.end() : end]))
    return sorted(found)


def _names_a_verb(command: str) -> bool:
    words = [w for w in command.split() if w not in _GLOBAL_BARE]
    verbs = _verbs()
    return bool(words) and (" ".join(words[:2]) in verbs or words[0] in verbs)


def _within(before: str) -> bool:
    """Tells whether a command is named inside a phrase (`list them with ...`, `see ...`),
    where `a call of TOOL` reads; elsewhere it is an instruction: `call TOOL`."""
    return before.endswith(("with ", "by ", "see ", "(see ", "from ", "(from "))


def _inside_backticks(text: str, at: int) -> bool:
    return text.count("`", 0, at) % 2 == 1


def _clause_end(text: str, start: int) -> int:
    """Where a command written in prose ends: before `, ` `; ` ` (` or a sentence's end."""
    i = start
    quote = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in ",;)" or (ch == "(" and text[i - 1] == " ") or _sentence_end(text, i):
            break
        i += 1
    return len(text[:i].rstrip()) if i < len(text) else i


def _sentence_end(text: str, i: int) -> bool:
    return text[i] == "." and (i + 1 == len(text) or text[i + 1] == " ")


def _flags(text: str, tool: ToolDef) -> str:
    """Each flag of `tool`'s verb in prose said as its argument (`--after` → `after`, a
    bare one as `name: true`, `--yes` as `confirm: true`, `-- CMD` as `command`)."""
    from tillage.verbs.tool_defs import CONFIRM

    params = {p.name: p for p in tool.verb.contract.params()}
    spelled: dict[str, str] = {}
    for prm in params.values():
        for name in (prm.spec.flag or "--" + prm.name.replace("_", "-"), *prm.spec.aliases):
            spelled[name] = prm.name
        if prm.spec.short:
            spelled[prm.spec.short] = prm.name
    by_field = {a.field: a for a in tool.args}
    command = next((a for a in tool.args if a.command), None)

    def said(flag: str) -> str | None:
        field = spelled.get(flag)
        if field is None:
            return None
        if tool.confirms and field == "yes":
            return f"{CONFIRM}: true"
        if tool.confirms and field == "dry_run":
            return f"{CONFIRM}: false"
        arg = by_field.get(field)
        if arg is None:
            return None
        return f"{arg.name}: true" if params[field].type == "bool" else arg.name

    def dashes(match: re.Match[str]) -> str:
        if command is None:
            return match.group(0)
        if match.group(1):
            return f"`{command.name}: {json.dumps(match.group(1))}`"
        return f"`{command.name}`"

    if command is not None:
        text = text.replace("after `--`", f"in `{command.name}`")
    text = _DASHES.sub(dashes, text)

    def valued(match: re.Match[str]) -> str:
        if _inside_backticks(text, match.start()):
            return match.group(0)  # the backticked pass says it
        word = said(match.group(1))
        if word is None or word.endswith(": true") or word.endswith(": false"):
            return match.group(0)
        return f"`{word}: {json.dumps(match.group(3))}`"

    text = _VALUED.sub(valued, text)

    def ticked(match: re.Match[str]) -> str:
        """A backticked flag and its value (`--take theirs app.db`): the argument and the
        value it takes, or the words marked as the command line's when no argument does."""
        if _in_person_command(text, match.start() + 1) or text[match.end() :].startswith(
            " " + NO_ARGUMENT
        ):
            return match.group(0)
        word = said(match.group(1))
        if word is None:
            if match.group(1) not in _all_flags():
                return match.group(0)
            return f"{match.group(0)} {NO_ARGUMENT}"
        rest = match.group(2).strip()
        if not rest or word.endswith((": true", ": false")):
            return f"`{word}`"
        try:
            values = shlex.split(rest)
        except ValueError:
            return f"`{word}` {rest}"
        field = spelled[match.group(1)]
        value: Any = values if _listy(params[field]) else " ".join(values)
        return f"`{word}: {json.dumps(_placeholder(value), ensure_ascii=False)}`"

    text = _TICKED_FLAG.sub(ticked, text)

    def flag(match: re.Match[str]) -> str:
        if _in_person_command(text, match.start()) or _inside_backticks(text, match.start()):
            return match.group(0)
        word = said(match.group(1))
        if word is None:
            if match.group(1) not in _all_flags():
                return match.group(0)  # no flag of ours (`sh -c`)
            return f"`{match.group(1)}` {NO_ARGUMENT}"
        return f"`{word}`"

    return _FLAG.sub(flag, text)


def _in_person_command(text: str, at: int) -> bool:
    """Tells whether `at` is inside a backticked command left for a person."""
    if not _inside_backticks(text, at):
        return False
    close = text.find("`", at)
    opening = text.rfind("`", 0, at)
    return (close != -1 and text[close + 1 :].startswith(" " + FOR_A_PERSON)) or text[
        :opening
    ].endswith(PERSON + " ")


def expand_ids(text: str, known: tuple[str, ...]) -> str:
    """Each hex word of `text` that begins exactly one of the IDs `known`, written whole."""

    def whole(match: re.Match[str]) -> str:
        word = match.group(0)
        found = {k for k in known if k.startswith(word)}
        return found.pop() if len(found) == 1 else word

    return _HEX_WORD.sub(whole, text)


def full_ids(value: Any, items: int | None = None) -> tuple[str, ...]:
    """The whole IDs (64 hex characters) a document holds as strings of their own; with
    `items`, in the first `items` of each list only (what can be said of a long one)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if len(v) == 64 and _WHOLE_ID.fullmatch(v):
                found.add(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v if items is None else v[:items])
    return tuple(sorted(found))
