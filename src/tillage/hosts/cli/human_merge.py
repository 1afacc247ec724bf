"""Human pages of the merge verbs (hosts/cli/human.py loads this module by verb prefix)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.human import REWIND_LINES
from tillage.hosts.cli.page import Cell, Page, change_rows, change_summary, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_KIND_TEXT = {
    "modify_modify": "both changed",
    "modify_delete": "changed here, deleted there",
    "delete_modify": "deleted here, changed there",
    "add_add": "both added",
    "type_change": "type differs",
}


def _what(page: Page) -> str:
    fork = page.take("fork")
    theirs = str(page.take("theirs") or "")
    return f"fork {fork}" if fork else f"snapshot {theirs[:12]}"


def _check_lines(page: Page, output: Any, exit_code: Any) -> None:
    passed = exit_code == 0
    verdict = (
        page.style.paint("passed", "green")
        if passed
        else page.style.paint(f"failed (exit {exit_code})", "red")
    )
    # Its output was passed on live, above this page: it is not printed a second time.
    said = " (its output is above)" if str(output or "").strip() else ""
    page.add(f"The check {verdict} in a scratch copy of the merged result{said}.")


def _conflict_rows(conflicts: list[Any]) -> list[list[Cell]]:
    return [
        [
            Cell(str(c.get("kind")), "red"),
            Cell(units.printable(str(c.get("path")))),
            Cell(str(c.get("reason") or _KIND_TEXT.get(str(c.get("kind")), "")), "dim"),
        ]
        for c in conflicts
    ]


def _merge(page: Page) -> None:
    what = _what(page)
    landed = page.take("landed")
    dry_run = page.take("dry_run")
    conflicts = page.take("conflicts") or []
    changed = page.take("changed") or []
    merged = page.take("merged") or []
    check_output = page.take("check_output")
    check_failed = page.take("check_failed")
    check_exit = page.take("check_exit_code")
    ours = str(page.take("ours") or "")
    theirs = str(page.take("theirs") or "")
    page.take("base")
    page.take("changes")
    page.take("result")
    undo = page.take("undo")
    nxt = page.take("next")
    page.take("preview_digest")
    again = str(nxt or _again(what, theirs))
    rows, more = change_rows(changed, REWIND_LINES)
    listing = table(rows, page.style, indent="  ")
    if more:
        listing.append(f"  … and {more:,} more (--json lists every path)")
    if page.take("into_fork"):
        _into_fork(page, what, landed, dry_run, changed, listing, conflicts, nxt)
        return
    if conflicts:
        page.add(
            f"Nothing landed: merging {what} has {units.count(len(conflicts), 'conflict')}:",
            *table(_conflict_rows(conflicts), page.style, indent="  "),
        )
        first = units.printable(str(conflicts[0].get("path")))
        here = f"`till cat {ours[:12]} {first}`" if ours else f"the file {first} here"
        there = f"`till cat {theirs[:12]} {first}`" if theirs else "the fork's own file"
        page.add(f"Compare the sides: {here} and {there} (theirs).")
        page.add(
            "To resolve them: `--into-fork` writes the merge into the fork (text conflicts "
            "with markers), or `--take ours|theirs PATH` settles paths."
        )
        page.next("Then merge again:", again)
        return
    if dry_run:
        if not changed:
            page.add(f"Nothing to merge: the workspace already has everything {what} changed.")
            return
        page.add(f"Merging {what} would change {change_summary(changed)}", *listing)
        if merged:
            page.add(f"{units.count(len(merged), 'file')} would merge line by line.")
        page.next("Nothing was changed. To land exactly this, run:", again)
        return
    if check_failed:
        page.add(f"Nothing landed: the check on {what}'s merged result failed.")
        _check_lines(page, check_output, check_exit)
        page.next("Fix it, then merge again:", again)
        return
    if not landed:
        page.add(f"Nothing to merge: the workspace already has everything {what} changed.")
        if check_exit is not None:
            _check_lines(page, check_output, check_exit)
        return
    page.add(f"Merged {what}: {change_summary(changed)}", *listing)
    if merged:
        page.add(
            f"Merged line by line: {', '.join(units.printable(str(p)) for p in merged[:10])}"
            + (f" and {len(merged) - 10:,} more" if len(merged) > 10 else "")
        )
    if check_exit is not None:
        _check_lines(page, check_output, check_exit)
    if nxt or undo:
        page.next("To undo the merge, run:", str(nxt or f"till rewind {undo} --yes"))


def _into_fork(
    page: Page,
    what: str,
    landed: Any,
    dry_run: Any,
    changed: list[Any],
    listing: list[str],
    conflicts: list[Any],
    nxt: Any,
) -> None:
    where = f"into {what}"
    if not changed and not conflicts:
        page.add(f"Nothing to merge {where}: it already has everything the workspace changed.")
        return
    verb = "would change" if dry_run else "changed"
    page.add(f"Merging the workspace {where} {verb} {change_summary(changed)}", *listing)
    if conflicts:
        page.add(
            f"Left to settle there ({units.count(len(conflicts), 'conflict')}):",
            *table(_conflict_rows(conflicts), page.style, indent="  "),
            "Edit the conflict markers away in the fork's files; settle the others with "
            "`--take ours|theirs PATH` on the merge that lands it.",
        )
    if landed and nxt:
        page.next("Nothing here was changed. Once settled, land it with:", str(nxt))


def _again(what: str, theirs: str) -> str:
    if what.startswith("fork "):
        return "till merge " + what.split(" ", 1)[1]
    return f"till merge --snapshot {theirs}"


RENDERERS: dict[str, Callable[[Page], None]] = {"merge.apply": _merge}
