"""Human pages of the store's lifecycle verbs (hosts/cli/human.py loads this module by verb
prefix): what a gc removed and reclaimed, the retention schedule, the space budget; and the
lines other pages borrow to tell a thinned snapshot's missing paths."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MISSING_LINES = 20


def _gc(page: Page) -> None:
    doc = page.doc
    for key in list(doc):
        page.take(key)
    dry = bool(doc.get("dry_run"))
    removed = int(doc.get("snapshots_removed") or 0)
    thinned = int(doc.get("snapshots_thinned") or 0)
    reclaimed = int(doc.get("bytes_reclaimed") or 0)
    before = int(doc.get("store_bytes_before") or 0)
    after = int(doc.get("store_bytes_after") or 0)
    head = "A gc would" if dry else "gc:"
    gone, thin = units.count(removed, "snapshot"), units.count(thinned, "snapshot")
    what = f"remove {gone}, thin {thin}" if dry else f"removed {gone}, thinned {thin}"
    page.add(f"{head} {what}.")
    page.fields(
        [
            ("Objects", f"{int(doc.get('objects_removed') or 0):,} no longer needed"),
            ("Packs", f"{int(doc.get('packs_rewritten') or 0):,} rewritten or deleted"),
            (
                "Reclaimed",
                f"{units.size(reclaimed)}  (store {units.size(before)} → {units.size(after)})",
            ),
        ]
    )
    if dry:
        page.next("Nothing was changed. To run it, run:", "till gc --yes")
    elif thinned:
        page.add("Thinned snapshots are graded partial: `till show ID` lists what they lost.")


def _retention(page: Page) -> None:
    policy: dict[str, Any] = page.take("retention") or {}
    changed = page.take("changed")
    page.add(
        "Retention schedule (a gc applies it; `till gc --dry-run` shows what it would remove):"
        if not changed
        else "Retention set:"
    )
    page.fields(
        [
            ("Keep all", f"every snapshot of the last {policy.get('keep_all')}"),
            ("Hourly", f"the newest of each UTC hour up to {policy.get('hourly')}"),
            ("Daily", f"the newest of each UTC day up to {policy.get('daily')}"),
            ("Weekly", f"the newest of each ISO week up to {policy.get('weekly')}"),
        ]
    )
    page.add(
        "Heads, pins, fork bases, each session's first and newest commit and recent undo points "
        "are always kept."
    )


def budget_line(budget: dict[str, Any]) -> str:
    """One line for `till status`: the store against its budget."""
    used = units.size(int(budget.get("store_bytes") or 0))
    cap = units.size(int(budget.get("max_bytes") or 0))
    free = units.size(int(budget.get("filesystem_free_bytes") or 0))
    reserve = units.size(int(budget.get("reserve_free_bytes") or 0))
    line = f"{used} of {cap}; {free} free on its disk (keeps {reserve})"
    if budget.get("over_budget"):
        line += "  OVER BUDGET"
    return line


def held_by(page: Page, holders: list[dict[str, Any]]) -> None:
    if not holders:
        return
    page.add("Over budget, and a gc cannot take these (protected):")
    rows = [
        [Cell(str(h.get("snapshot"))[:12], "yellow"), Cell(str(h.get("why"))), Cell("")]
        for h in holders[:MISSING_LINES]
    ]
    page.add(*table(rows, page.style, indent="  "))
    if len(holders) > MISSING_LINES:
        page.add(f"  … and {len(holders) - MISSING_LINES:,} more")
    page.next("Raise the budget, or unpin what you no longer need:", "till budget --max SIZE")


def _budget(page: Page) -> None:
    doc = page.doc
    for key in list(doc):
        page.take(key)
    page.add(f"Budget: {budget_line(doc)}")
    held_by(page, list(doc.get("held_by") or []))
    if doc.get("over_budget"):
        page.next("Nothing was removed. See what getting under would remove:", "till gc --dry-run")


def missing(page: Page, items: list[dict[str, Any]], intro: str) -> None:
    """Lists a thinned snapshot's paths whose bytes a gc dropped."""
    if not items:
        return
    page.add(f"{intro} ({units.count(len(items), 'path')}):")
    rows = [
        [Cell(units.printable(str(m.get("path")))), Cell(str(m.get("reason")), "dim")]
        for m in items[:MISSING_LINES]
    ]
    page.add(*table(rows, page.style, indent="  "))
    if len(items) > MISSING_LINES:
        page.add(f"  … and {len(items) - MISSING_LINES:,} more (`--json` lists every one)")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "store.gc": _gc,
    "store.retention": _retention,
    "store.budget": _budget,
}
