"""Human pages of the verbs about tillage itself (hosts/cli/human.py loads this module by verb
prefix): its version, its contracts and the MCP tools it would offer, each a short page that
points at `--json` for the whole document (a schema is for programs)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A tool's or verb's description is cut to its first sentence, and to this many characters.
SUMMARY_CHARS = 90


def summary(text: str) -> str:
    """The first sentence of a description, on one line, at most SUMMARY_CHARS long."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    cut = first.find(". ")
    if cut >= 0:
        first = first[: cut + 1]
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1].rstrip() + "…"
    return first


def _version(page: Page) -> None:
    version = page.take("version")
    protocol = page.take("protocol")
    fmt = page.take("format")
    python = page.take("python")
    page.add(f"till {version} (protocol {protocol}, storage format {fmt}, Python {python})")


def _contracts(page: Page) -> None:
    verbs: list[dict[str, Any]] = page.take("verbs") or []
    page.add(f"{units.count(len(verbs), 'verb')}; `till --json contracts` prints every contract:")
    rows = [
        [
            Cell(f"till {v.get('command')}" if v.get("command") else "", "bold"),
            Cell(str(v.get("effect") or ""), "dim"),
            Cell(summary(str(v.get("doc") or ""))),
        ]
        for v in verbs
    ]
    page.add(*table(rows, page.style, indent="  "))


def _mcp(page: Page) -> None:
    folder = units.printable(str(page.take("folder")))
    attached = page.take("attached")
    tools: list[dict[str, Any]] = page.take("tools") or []
    page.take("serving")
    reason, next_step = page.take("reason"), page.take("next")
    if not attached:
        why = units.printable(str(reason)) if reason else f"{folder} is not attached"
        page.add(f"attached: no ({why}): `till mcp` offers no tools here.")
        if next_step:
            page.add(f"Next: {units.printable(str(next_step))}")
        else:
            page.next("Attach it first:", "till watch")
        return
    page.add(
        f"`till mcp` offers {units.count(len(tools), 'tool')} for {folder} "
        "(`till --json mcp --list` prints their schemas):"
    )
    rows = [
        [Cell(str(t.get("name")), "bold"), Cell(summary(str(t.get("description") or "")))]
        for t in tools
    ]
    page.add(*table(rows, page.style, indent="  "))
    page.next("Serve them to an agent on stdio:", "till mcp")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "system.version": _version,
    "system.contracts": _contracts,
    "system.mcp": _mcp,
}
