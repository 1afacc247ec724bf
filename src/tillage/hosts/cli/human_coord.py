"""Human pages of the blackboard verbs (loaded by verb prefix from human.py); `coord read`
prints the value itself (its contract's raw output)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _who(entry: dict[str, Any]) -> str:
    return f"{units.printable(str(entry.get('owner')))} in {entry.get('workspace')}"


def _write(page: Page) -> None:
    path = units.printable(str(page.take("path")))
    key = page.style.paint(path, "bold")
    size = units.size(int(page.take("size") or 0))
    version = page.take("version")
    owner, where = page.take("owner"), page.take("workspace")
    page.take("written_at")
    digest = str(page.take("digest") or "")
    page.add(f"Wrote {key} ({size}, version {version}, digest {digest[:12]}) as {owner}.")
    page.add(f"Written in {where}; the workspace and every fork of its family read it now.")
    page.next("To read it back, run:", f"till coord read {path}")


def _list(page: Page) -> None:
    entries = page.take("entries") or []
    if not entries:
        page.add("The family's blackboard is empty: `till coord write KEY --value V` adds one.")
        return
    page.add(f"{units.count(len(entries), 'key')} on the family's blackboard:")
    rows = [
        [
            Cell(units.printable(str(e.get("path"))), "bold"),
            Cell(units.size(int(e.get("size") or 0)), right=True),
            Cell(f"v{e.get('version')}", "dim"),
            Cell(units.when_text(str(e.get("written_at")), page.now)),
            Cell(_who(e), "dim"),
        ]
        for e in entries
    ]
    page.add(*table(rows, page.style, indent="  "))


RENDERERS: dict[str, Callable[[Page], None]] = {
    "coord.write": _write,
    "coord.list": _list,
}
