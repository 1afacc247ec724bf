"""The building blocks of a human page: cells and aligned tables, snapshot and change lines,
and `Page`, which builds one verb's text and remembers which fields it used. Every renderer
(human.py, human_lifecycle.py, human_sync.py) builds on these, and none on another's pages."""

from __future__ import annotations

from tillage.hosts.cli import units
from tillage.hosts.cli.colour import PLAIN, Style

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_KIND_WORDS = {
    "added": ("added", "green"),
    "modified": ("modified", "yellow"),
    "deleted": ("deleted", "red"),
    "type_changed": ("type", "cyan"),
    "mode_changed": ("mode", "cyan"),
}


# -- cells and tables ------------------------------------------------------------------------


class Cell:
    """One table cell: its text, how to paint it, and which side it sticks to."""

    __slots__ = ("right", "styles", "text")

    def __init__(self, text: str, *styles: str, right: bool = False) -> None:
        self.text = text
        self.styles = styles
        self.right = right


def table(rows: list[list[Cell]], style: Style, indent: str = "") -> list[str]:
    """Returns rows as aligned columns (two spaces apart); a column empty in every row goes.

    Widths are measured before painting, so colour never breaks the alignment.
    """
    if not rows:
        return []
    ncols = max(len(r) for r in rows)
    cells = [r + [Cell("")] * (ncols - len(r)) for r in rows]
    widths = [max(len(r[i].text) for r in cells) for i in range(ncols)]
    keep = [i for i in range(ncols) if widths[i] > 0]
    out = []
    for row in cells:
        parts = []
        for i in keep:
            cell = row[i]
            pad = " " * (widths[i] - len(cell.text))
            painted = style.paint(cell.text, *cell.styles)
            parts.append(pad + painted if cell.right else painted + pad)
        out.append((indent + "  ".join(parts)).rstrip())
    return out


def snapshot_cells(snap: dict[str, Any], now: float) -> list[Cell]:
    """A snapshot as timeline columns: ID, age, trigger, files, size, grade, pin, label."""
    partial = snap.get("grade") not in (None, "exact")
    files = int(snap.get("files") or 0)
    return [
        Cell(str(snap.get("short") or str(snap.get("id", ""))[:12]), "yellow"),
        Cell(units.when_text(str(snap.get("sealed_at", "")), now)),
        Cell(str(snap.get("trigger") or ""), "cyan"),
        # "1 file " keeps the counts' digits aligned in a right-aligned column.
        Cell(units.count(files, "file", "files") if files != 1 else "1 file ", right=True),
        Cell(units.size(int(snap.get("bytes") or 0)), right=True),
        Cell(str(snap["grade"]) if partial else "", "red"),
        Cell("pinned" if snap.get("pinned") else "", "magenta"),
        Cell(units.printable(str(snap.get("label") or "")), "bold"),
    ]


def snapshot_line(snap: dict[str, Any], now: float, style: Style = PLAIN) -> str:
    """A snapshot on one line, as in the timeline but without column padding."""
    cells = [c for c in snapshot_cells(snap, now) if c.text]
    return "  ".join(style.paint(c.text.strip(), *c.styles) for c in cells)


def snapshot_ref(snap: dict[str, Any], now: float, style: Style = PLAIN) -> str:
    """A snapshot named in a sentence: `28ca487b1971 (3 min ago, initial, "label")`."""
    facts = [units.when_text(str(snap.get("sealed_at", "")), now), str(snap.get("trigger", ""))]
    if snap.get("label"):
        facts.append(f'"{snap["label"]}"')
    short = str(snap.get("short") or str(snap.get("id", ""))[:12])
    return f"{style.paint(short, 'yellow')} ({', '.join(f for f in facts if f)})"


def change_rows(changes: list[Any], limit: int | None = None) -> tuple[list[list[Cell]], int]:
    """Changes as rows (kind, size change, path); returns the rows and how many were left off."""
    rows = []
    shown = changes if limit is None else changes[:limit]
    for change in shown:
        word, colour = _KIND_WORDS.get(str(change.get("kind")), (str(change.get("kind")), ""))
        delta = units.size_change(change.get("old_size"), change.get("new_size"))
        if change.get("kind") == "mode_changed":
            delta = ""  # only the permissions changed: a size would say nothing
        rows.append(
            [
                Cell(word, *([colour] if colour else [])),
                Cell(delta, "dim", right=True),
                Cell(units.printable(str(change.get("path")))),
            ]
        )
    return rows, len(changes) - len(shown)


def change_summary(changes: list[Any]) -> str:
    """`3 paths (1 added, 2 modified)`."""
    tally: dict[str, int] = {}
    for change in changes:
        word = _KIND_WORDS.get(str(change.get("kind")), (str(change.get("kind")), ""))[0]
        tally[word] = tally.get(word, 0) + 1
    parts = ", ".join(f"{n:,} {word}" for word, n in tally.items())
    return units.count(len(changes), "path") + (f" ({parts})" if parts else "")


def command(text: str, style: Style) -> str:
    """A command for the person to run, set apart on its own indented line."""
    return "  " + style.paint(text, "bold")


# -- one page per verb -----------------------------------------------------------------------


_HEX = frozenset("0123456789abcdef")


class Page:
    """Builds one verb's text and remembers which fields it used (the rest is listed after)."""

    def __init__(self, doc: dict[str, Any], now: float, style: Style, *, footer: bool) -> None:
        self.doc = doc
        self.now = now
        self.style = style
        self.footer = footer
        self.used: set[str] = set()
        self.lines: list[str] = []
        self.tail: list[str] = []  # the "run this next" lines: always last, after any extras

    def take(self, key: str) -> Any:
        self.used.add(key)
        return self.doc.get(key)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def next(self, intro: str, cmd: str) -> None:
        """Ends the page with the command to run next (unless a prompt asks instead)."""
        if self.footer:
            # People read and type 12-character IDs; every command takes them as a prefix.
            words = [w[:12] if len(w) == 64 and set(w) <= _HEX else w for w in cmd.split(" ")]
            self.tail = [intro, command(" ".join(words), self.style)]

    def fields(self, pairs: list[tuple[str, str]]) -> None:
        """Adds `Label  value` lines with the labels aligned."""
        width = max((len(k) for k, v in pairs if v), default=0)
        for key, value in pairs:
            if value:
                self.add(f"{self.style.paint(key.ljust(width), 'dim')}  {value}")

    def snap(self, key: str) -> str:
        value = self.take(key)
        return snapshot_line(value, self.now, self.style) if isinstance(value, dict) else ""

    def ref(self, value: Any) -> str:
        return snapshot_ref(value, self.now, self.style) if isinstance(value, dict) else ""
