"""The human page of `till estimate` (hosts/cli/human.py loads this module by verb prefix): the
size of a cold seal, what the store holds already, the predicted time, and bytes by class."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# How many excluded subtrees are named before the rest are counted.
EXCLUDED_LINES = 10


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else units.duration(value)


def _estimate(page: Page) -> None:
    files = int(page.take("files") or 0)
    dirs = int(page.take("dirs") or 0)
    total = int(page.take("bytes") or 0)
    new = int(page.take("new_bytes") or 0)
    dedup = int(page.take("dedup_bytes") or 0)
    seconds = float(page.take("seconds") or 0.0)
    classes: dict[str, Any] = page.take("classes") or {}
    excluded: list[Any] = page.take("excluded") or []
    page.add(
        f"A cold seal would capture {units.count(files, 'file')} in "
        f"{units.count(dirs, 'folder')}: {units.size(total)}."
    )
    page.add(
        f"New to the store: {units.size(new)}; already stored or repeated: {units.size(dedup)}."
    )
    page.add(f"Predicted seal time on this machine: about {_seconds(seconds)}.")
    rows = [
        [Cell(name, "bold"), Cell(units.size(int(n)), right=True), Cell(_share(int(n), total))]
        for name, n in sorted(classes.items(), key=lambda kv: -int(kv[1]))
        if int(n)
    ]
    if rows:
        page.add("By class:")
        page.add(*table(rows, page.style, indent="  "))
    if excluded:
        shown = ", ".join(units.printable(str(p)) for p in excluded[:EXCLUDED_LINES])
        more = len(excluded) - EXCLUDED_LINES
        tail = f" and {more} more" if more > 0 else ""
        page.add(f"Excluded by .tillagepolicy: {shown}{tail}.")
    page.add(page.style.paint("Nothing was written: no store, no attachment.", "dim"))
    page.next("To seal it and keep watching it, run:", "till watch")


def _share(part: int, total: int) -> str:
    return f"{100 * part / total:.0f}%" if total else ""


RENDERERS: dict[str, Callable[[Page], None]] = {"estimate.folder": _estimate}
