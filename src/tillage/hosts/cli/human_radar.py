"""Human pages of the radar, claim and try verbs (loaded by verb prefix from human.py)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _places(conflict: dict[str, Any]) -> str:
    """`workspace, alpha, beta`: where a path was changed."""
    names = [str(n) for n in conflict.get("forks") or []]
    if conflict.get("workspace"):
        names.insert(0, "workspace")
    return ", ".join(names)


def _claimed(conflict: dict[str, Any]) -> str:
    """`claimed by alice (src/**)` when live claims cover the path, `contested: claimed by
    ...` when they do not agree on who works there (the conflict's `claim`)."""
    claims = conflict.get("claimed_by") or []
    if not claims:
        return ""
    held = ", ".join(
        f"{units.printable(str(k.get('owner')))} ({units.printable(str(k.get('pattern')))})"
        for k in claims
    )
    contested = "contested: " if conflict.get("claim") == "contested" else ""
    return f"{contested}claimed by {held}"


def _radar(page: Page) -> None:
    conflicts = page.take("conflicts") or []
    scanned = int(page.take("forks_scanned") or 0)
    events = int(page.take("events") or 0)
    page.take("scanned")
    among = f"{units.count(scanned, 'live fork')} and the workspace"
    if not scanned:
        page.add("No forks to compare: `till fork NAME` makes one.")
        return
    if not conflicts:
        page.add(f"No path is changed in more than one place ({among}, as last sealed).")
    else:
        page.add(
            f"{units.count(len(conflicts), 'path')} changed in more than one place "
            f"({among}, as last sealed):"
        )
        rows = [
            [
                Cell(units.printable(str(c.get("path"))), "yellow"),
                Cell(_places(c), "dim"),
                Cell(_claimed(c)),
            ]
            for c in conflicts
        ]
        page.add(*table(rows, page.style, indent="  "))
    if events:
        page.add(f"{units.count(events, 'conflict event')} added to the log (`till events`).")
    page.add("The radar reads sealed states: `till snap` in a fork shows its latest edits.")


def _expiry(claim: dict[str, Any], now: float) -> str:
    stamp = claim.get("expires_at")
    if not stamp:
        return "no expiry"
    then = units.parse_rfc3339(str(stamp))
    if then is None:
        return str(stamp)
    left = max(0.0, then - now)
    return f"expires in {units.duration(left)} ({units.local_time(str(stamp))})"


def _claim_line(claim: dict[str, Any], page: Page) -> str:
    pattern = page.style.paint(units.printable(str(claim.get("pattern"))), "bold")
    owner = units.printable(str(claim.get("owner")))
    return f"{pattern} for {owner}, {_expiry(claim, page.now)}"


def _claim(page: Page) -> None:
    claim = page.take("claim") or {}
    renewed = page.take("renewed")
    what = "Renewed" if renewed else "Claimed"
    page.add(f"{what} {_claim_line(claim, page)}")
    where = claim.get("workspace")
    taken = f" (taken in {units.printable(str(where))})" if where else ""
    page.add(
        f"Claim {page.style.paint(str(claim.get('id')), 'yellow')}{taken}, seen by every fork."
    )
    page.next(
        "To release it, run:",
        f"till release {claim.get('id')} --owner {_quote(str(claim.get('owner')))}",
    )


def _claims(page: Page) -> None:
    claims = page.take("claims") or []
    if not claims:
        page.add("No live claims.")
        return
    page.add(f"{units.count(len(claims), 'live claim')} (the workspace and all its forks):")
    rows = [
        [
            Cell(str(c.get("id")), "yellow"),
            Cell(units.printable(str(c.get("owner")))),
            Cell(units.printable(str(c.get("pattern"))), "bold"),
            Cell(_expiry(c, page.now), "dim"),
            Cell(units.printable(str(c.get("workspace") or "")), "dim"),
        ]
        for c in claims
    ]
    page.add(*table(rows, page.style, indent="  "))


def _release(page: Page) -> None:
    claim = page.take("released") or {}
    pattern = units.printable(str(claim.get("pattern")))
    page.add(
        f"Released claim {page.style.paint(str(claim.get('id')), 'yellow')} on "
        f"{page.style.paint(pattern, 'bold')} ({units.printable(str(claim.get('owner')))})."
    )


def _try(page: Page) -> None:
    before = page.take("before")
    after = page.take("after")
    code = page.take("exit_code")
    page.take("output")  # the command's output went to the terminal as it ran
    page.take("undo")  # the snapshot; the command below names it
    undo = page.take("undo_command")
    if code == 0:
        page.add("The command succeeded.")
    else:
        page.add(f"The command failed (exit status {code}).")
    page.fields([("Before", page.ref(before)), ("After", page.ref(after))])
    if undo:
        page.next("To undo what it did, run:", str(undo))


def _quote(word: str) -> str:
    """Quotes a word for a POSIX shell when it needs it."""
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_"
    if word and all(ch in safe for ch in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


RENDERERS: dict[str, Callable[[Page], None]] = {
    "radar.scan": _radar,
    "claim.take": _claim,
    "claim.list": _claims,
    "claim.release": _release,
    "try.run": _try,
}
