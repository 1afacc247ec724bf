"""Human pages of the operation log and `till undo` (hosts/cli/human.py loads this module by
verb prefix): one line per operation, short IDs, what undoing each does."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, change_rows, change_summary, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _state(op: dict[str, Any]) -> tuple[str, str]:
    """What undoing it does, and the colour it is shown in."""
    if op.get("undone_by"):
        return f"undone by {str(op['undone_by'])[:12]}", "dim"
    if op.get("undoable"):
        return "undo: " + units.printable(str(op.get("description"))), ""
    return "cannot be undone", "dim"


def _op_log(page: Page) -> None:
    ops: list[dict[str, Any]] = page.take("operations") or []
    more = int(page.take("more") or 0)
    if not ops:
        page.add("No operations recorded yet: rewind, merge, fork, pin, claim... each is one.")
        return
    rows = []
    for op in ops:
        state, colour = _state(op)
        command = str(op.get("command"))
        if op.get("undoes"):
            command = f"undo {str(op['undoes'])[:12]}"
        rows.append(
            [
                Cell(str(op.get("short")), "yellow"),
                Cell(units.when_text(str(op.get("at")), page.now), "dim"),
                Cell(units.printable(command)),
                Cell(units.printable(str(op.get("agent") or "")), "dim"),
                Cell(state, *([colour] if colour else [])),
            ]
        )
    page.add(*table(rows, page.style))
    if more:
        page.add(f"… {more:,} more (`till op log -n {len(ops) + more}`)")
    newest = next((o for o in ops if o.get("undoable") and not o.get("undoes")), None)
    if newest is not None:
        page.next("To preview undoing the newest, run:", f"till undo {newest['short']} --dry-run")


def _undo(page: Page) -> None:
    op: dict[str, Any] = page.take("operation") or {}
    applied = bool(page.take("applied"))
    description = units.printable(str(page.take("description")))
    changes = page.take("changes") or []
    next_cmd = str(page.take("next"))
    undo_op = page.take("undo_operation")
    restored = page.take("restored")
    sealed = page.take("sealed_first")
    what = f"{op.get('short')} ({units.printable(str(op.get('command')))})"
    if applied:
        page.add(f"Undid operation {what}: {description}.")
    else:
        page.add(f"Undoing operation {what} would {description}.")
    if changes:
        page.add(("Changed " if applied else "It would change ") + change_summary(changes) + ":")
        rows, left = change_rows(changes)
        page.add(*table(rows, page.style, "  "))
        if left:
            page.add(f"  … {left:,} more")
    if applied and restored:
        page.add(f"The folder is as snapshot {str(restored)[:12]} again.")
    if sealed:
        page.add(f"What it held before was sealed first as {str(sealed)[:12]}.")
    if applied:
        short = str(undo_op)[:12]
        page.next(f"Recorded as operation {short}. To undo this undo, run:", next_cmd)
    else:
        page.next("Nothing was changed. To undo it, run:", next_cmd)


RENDERERS: dict[str, Callable[[Page], None]] = {
    "operation.log": _op_log,
    "operation.undo": _undo,
}
