"""Human pages of the projection verbs (hosts/cli/human.py loads this module by verb prefix):
what a hydrate laid down, and what a flush decided, path by path, with conflicts, contested
entries and orphans called out beside what to do about them."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The order a flush's kinds are told in, and how each is painted.
_KINDS = {
    "created": "green",
    "written": "yellow",
    "deleted": "red",
    "converged": "cyan",
    "conflict": "red",
    "contested": "magenta",
    "orphan": "dim",
    "readonly": "dim",
    "unchanged": "dim",
}


def _quote(word: str) -> str:
    """A folder as a shell word (shlex.quote without importing re at start-up)."""
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_"
    if word and all(ch in safe for ch in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _hydrate(page: Page) -> None:
    place = str(page.take("place"))
    mounts: list[dict[str, Any]] = page.take("mounts") or []
    files = int(page.take("files") or 0)
    collections = units.count(len(mounts), "collection")
    page.add(f"Hydrated {place}: {units.count(files, 'file')} from {collections}.")
    rows = [
        [
            Cell(units.printable(str(m.get("prefix") or "(the whole folder)")), "bold"),
            Cell(units.count(int(m.get("entries") or 0), "entry", "entries"), right=True),
            Cell(units.printable(str(m.get("collection")))),
            Cell("" if m.get("writable") else "read-only", "dim"),
        ]
        for m in mounts
    ]
    page.add(*table(rows, page.style, indent="  "))
    if any(m.get("writable") for m in mounts):
        page.next(
            "When the run is done, bring the folder back:",
            f"till --repo {_quote(place)} project flush",
        )


def _short(digest: Any, absent: str) -> str:
    return str(digest)[:12] if digest else absent


def _flush(page: Page) -> None:
    place = str(page.take("place"))
    outcomes: list[dict[str, Any]] = page.take("outcomes") or []
    conflicts: list[dict[str, Any]] = page.take("conflicts") or []
    contested: list[dict[str, Any]] = page.take("contested") or []
    counts: dict[str, int] = page.take("counts") or {}
    unchanged = int(counts.get("unchanged", 0))
    changed = [o for o in outcomes if o.get("kind") != "unchanged"]
    if not changed:
        if unchanged:
            page.add(f"Nothing to flush from {place}: {units.count(unchanged, 'file')} unchanged.")
        else:
            page.add(f"Nothing to flush from {place}: no file under a writable mount.")
        return
    told = [k for k in _KINDS if k != "unchanged" and counts.get(k)]
    told += sorted(k for k in counts if k not in _KINDS)
    summary = ", ".join(f"{counts[k]:,} {k}" for k in told)
    page.add(f"Flushed {place}: {summary}.")
    order = {k: i for i, k in enumerate(_KINDS)}
    changed.sort(key=lambda o: (order.get(str(o.get("kind")), len(order)), str(o.get("path"))))
    rows = [
        [
            Cell(str(o.get("kind")), _KINDS.get(str(o.get("kind")), "")),
            Cell(units.printable(str(o.get("path")))),
        ]
        for o in changed
    ]
    page.add(*table(rows, page.style, indent="  "))
    if unchanged:
        page.add(f"{units.count(unchanged, 'file')} unchanged.")
    orphans = int(counts.get("orphan", 0))
    if orphans:
        page.add(
            "",
            f"{units.count(orphans, 'orphan')}: under a writable mount's prefix, but no mount "
            "takes them (a name starting with `_`, or a file where a mount's folder belongs); "
            "left in the folder and written nowhere.",
            "Rename a file to keep it.",
        )
    if contested:
        page.add(
            "",
            f"{units.count(len(contested), 'contested entry', 'contested entries')}: another "
            "run was writing them, so nothing was written.",
            "Flush again when it is done.",
        )
    if conflicts:
        _conflicts(page, place, conflicts)


def _conflicts(page: Page, place: str, conflicts: list[dict[str, Any]]) -> None:
    page.add(
        "",
        page.style.paint(f"{units.count(len(conflicts), 'conflict')}", "red", "bold")
        + ": the collection and the folder both changed since the last hydrate or flush;",
        "nothing was written for them (SHA-256 of the base, the collection's, the folder's):",
    )
    rows = [
        [
            Cell(units.printable(str(c.get("path"))), "bold"),
            Cell(_short(c.get("base"), "none"), "dim"),
            Cell(_short(c.get("theirs"), "removed"), "yellow"),
            Cell(_short(c.get("ours"), "deleted"), "yellow"),
        ]
        for c in conflicts
    ]
    page.add(*table(rows, page.style, indent="  "))
    page.next(
        "To take the collection's version, hydrate again (it replaces the folder's copy);\n"
        "to keep yours, copy it aside, hydrate, put it back and flush:",
        f"till --repo {_quote(place)} project hydrate",
    )


RENDERERS: dict[str, Callable[[Page], None]] = {
    "project.hydrate": _hydrate,
    "project.flush": _flush,
}
