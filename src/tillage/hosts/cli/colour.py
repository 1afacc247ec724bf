"""Whether to colour, and how: plain ANSI SGR codes, only where a terminal wants them.

`--color auto` (the default) colours only when stdout is a terminal and `NO_COLOR` is unset or
empty (https://no-color.org); `never` never does; `always` does even on a pipe. Under `--json`
nothing is ever coloured: the document is for programs.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CHOICES = ("auto", "always", "never")

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def wanted(choice: str, *, is_tty: bool, env: Mapping[str, str], json_mode: bool) -> bool:
    """Decides colour for stdout from the flag, the terminal and `NO_COLOR`."""
    if json_mode or choice == "never":
        return False
    if choice == "always":
        return True
    return is_tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"


class Style:
    """Paints text when colour is on; returns it unchanged when it is off.

    A plain class, not a dataclass: building one costs nothing at start-up.
    """

    __slots__ = ("colour",)

    def __init__(self, colour: bool = False) -> None:
        self.colour = colour

    def paint(self, text: str, *styles: str) -> str:
        """`text` in `styles` (names from _CODES); an empty name is no style, so a page can
        write `Cell(text, "red" if missing else "")`."""
        if not self.colour or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles if s)
        return f"\x1b[{codes}m{text}\x1b[0m" if codes else text


PLAIN = Style(False)
