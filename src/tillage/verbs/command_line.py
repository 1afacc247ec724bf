"""The command line that asks for a request again: what a next step prints so a person can run it
as it stands (`till fork-rm try-redis --yes`), never a placeholder (`NAME`, `ID`).

Derived from the contract's params, as the parser spells them; snapshot IDs are cut to the 12
characters people read (a prefix every command takes).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.verbs.contract import Contract

_HEX = frozenset("0123456789abcdef")


def short_id(value: str) -> str:
    """A 64-hex ID as the 12 characters people read; anything else as it is."""
    return value[:12] if len(value) == 64 and set(value) <= _HEX else value


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def _word(value: Any) -> str:
    """A word as a POSIX shell reads it back: bare when it can be (a name such as `head~1`:
    a tilde past the first character expands to nothing), else in single quotes."""
    import shlex

    word = short_id(str(value))
    if word and all(c in _SAFE or (c == "~" and i) for i, c in enumerate(word)):
        return word
    return shlex.quote(word)


def command_line(contract: Contract[Any, Any], request: Any, **changes: Any) -> str:
    """`till CLI ...` asking for `request` with `changes` applied (flags left at their default
    are left out), quoted for a POSIX shell."""
    import dataclasses

    if changes:
        request = dataclasses.replace(request, **changes)
    words = ["till", contract.cli]
    flags: list[str] = []
    tail: list[str] = []
    for prm in contract.params():
        value = getattr(request, prm.name)
        spec = prm.spec
        if spec.remainder:
            if value:
                tail = ["--", *(_word(v) for v in value)]
            continue
        if value is None or value is False or value in (prm.default, ()):
            continue
        if spec.positional:
            words.append(_word(value))
            continue
        flag = spec.short or spec.flag or "--" + prm.name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, (tuple, list)):
            flags += [flag, *(_word(v) for v in value)]
        else:
            flags += [flag, _word(value)]
    return " ".join([*words, *flags, *tail])
