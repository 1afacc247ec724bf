"""Pages of what a snapshot holds: `till ls`, and the text parts of `till diff` (`--stat`'s
per-file counts and summary line, `-p`'s unified diffs), each as git and restic print them."""

from __future__ import annotations

import stat as stat_mod
from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.colour import Style
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_TYPE_BITS = {"file": stat_mod.S_IFREG, "dir": stat_mod.S_IFDIR, "symlink": stat_mod.S_IFLNK}
STAT_BAR = 40  # the widest `+++--` bar, as git's default on an 80-column terminal


def stat_lines(stat: dict[str, Any], style: Style) -> list[str]:
    """` src/app.py | 3 ++-` per file, then `2 files changed, 3 insertions(+), 1 deletion(-)`."""
    files = list(stat.get("files") or [])
    if not files:
        return []
    width = max(len(units.printable(str(f.get("path")))) for f in files)
    most = max((int(f.get("insertions") or 0) + int(f.get("deletions") or 0)) for f in files)
    scale = min(1.0, STAT_BAR / most) if most else 1.0
    out = []
    for f in files:
        path = units.printable(str(f.get("path"))).ljust(width)
        if f.get("binary"):
            out.append(f" {path} | Bin")
            continue
        if f.get("insertions") is None:
            out.append(f" {path} | {f.get('note') or ''}")
            continue
        plus, minus = int(f["insertions"]), int(f.get("deletions") or 0)
        bar = style.paint("+" * _bar(plus, scale), "green") + style.paint(
            "-" * _bar(minus, scale), "red"
        )
        out.append(f" {path} | {plus + minus} {bar}".rstrip())
    changed = int(stat.get("files_changed") or 0)
    summary = units.count(changed, "file") + " changed"
    plus, minus = int(stat.get("insertions") or 0), int(stat.get("deletions") or 0)
    summary += f", {plus:,} insertion{'' if plus == 1 else 's'}(+)"
    summary += f", {minus:,} deletion{'' if minus == 1 else 's'}(-)"
    out.append(" " + summary)
    return out


def _bar(count: int, scale: float) -> int:
    return max(1, round(count * scale)) if count else 0


def patch_lines(patches: list[dict[str, Any]], style: Style) -> list[str]:
    """Each file's unified diff, its lines painted as git paints them; a file with no text diff
    says why (`Binary files a/x and b/x differ`)."""
    out: list[str] = []
    for patch in patches:
        path = units.printable(str(patch.get("path")))
        out.append(style.paint(f"diff {path}", "bold"))
        text = patch.get("text")
        if text is None:
            note = str(patch.get("note") or "")
            out.append(f"Binary files differ: {path}" if patch.get("binary") else f"({note})")
            continue
        for line in str(text).splitlines():
            out.append(_painted(line, style))
    return out


def _painted(line: str, style: Style) -> str:
    if line.startswith(("+++", "---")):
        return style.paint(line, "bold")
    if line.startswith("@@"):
        return style.paint(line, "cyan")
    if line.startswith("+"):
        return style.paint(line, "green")
    if line.startswith("-"):
        return style.paint(line, "red")
    return line


def _ls(page: Page) -> None:
    entries = page.take("entries") or []
    snap = page.take("snapshot")
    where = page.take("path")
    more = int(page.take("more") or 0)
    after = page.take("next_after")
    long = page.take("long")
    if not entries:
        page.add("Nothing there." if where is None else f"Nothing at {where}.")
        return
    rows = []
    for e in entries:
        kind = str(e.get("kind"))
        name = units.printable(str(e.get("path")))
        if kind == "dir":
            name += "/"
        elif kind == "symlink":
            name += " -> " + units.printable(str(e.get("target") or ""))
        size = "" if e.get("size") is None else units.size(int(e["size"]))
        cells = [
            Cell(stat_mod.filemode(_TYPE_BITS.get(kind, 0) | int(e.get("mode") or 0)), "dim"),
            Cell(size, right=True),
        ]
        if long:
            cells.append(Cell(units.local_time(str(e.get("mtime") or "")), "dim"))
            cells.append(Cell(str(e.get("content") or "")[:12], "yellow"))
        cells.append(Cell(name, "blue", "bold") if kind == "dir" else Cell(name))
        rows.append(cells)
    page.add(*table(rows, page.style))
    if more:
        source = "@" if snap is None else str(snap.get("short") or "")
        words = ["till", "ls", source] + ([str(where)] if where else [])
        words += ["--after", str(after), "-n", str(len(entries))]
        page.add(f"… {more:,} more")
        page.next("The next page:", " ".join(words))


RENDERERS: dict[str, Callable[[Page], None]] = {"timeline.ls": _ls}
