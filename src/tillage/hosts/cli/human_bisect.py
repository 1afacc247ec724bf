"""Human pages of the bisect verbs (hosts/cli/human.py loads this module by verb prefix)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_VERDICT_STYLE = {"good": "green", "bad": "red", "skip": "yellow"}


def _took(seconds: float) -> str:
    """How long a check ran: `0.21 s` under ten seconds, else as an ETA reads."""
    return f"{seconds:.2f} s" if seconds < 10 else units.duration(seconds)


def _probe_rows(probes: list[Any]) -> list[list[Cell]]:
    """One row a probe: snapshot, verdict, exit status, how long the check took, its label."""
    rows = []
    for probe in probes:
        snap = probe.get("snapshot") or {}
        verdict = str(probe.get("verdict"))
        rows.append(
            [
                Cell(str(snap.get("short") or ""), "yellow"),
                Cell(verdict, _VERDICT_STYLE.get(verdict, "")),
                Cell(f"exit {probe.get('exit_code')}", "dim"),
                Cell(_took(float(probe.get("seconds") or 0.0)), "dim", right=True),
                Cell(units.printable(str(snap.get("label") or "")), "bold"),
            ]
        )
    return rows


def _bisect(page: Page) -> None:
    first_bad = page.take("first_bad") or {}
    last_good = page.take("last_good") or {}
    probes = page.take("probes") or []
    outcome = page.take("outcome")
    candidates = page.take("candidates") or []
    size = int(page.take("range_size") or 0)
    left = int(page.take("steps_left") or 0)
    sealed = page.take("sealed")
    narrowed = page.take("range") or {}
    page.take("probe_count")
    following = page.take("next")
    bad = narrowed.get("bad") or first_bad
    remaining = int(narrowed.get("remaining") or len(candidates))
    if isinstance(sealed, dict):
        page.add("Sealed the folder first: " + page.ref(sealed))
    ran = f"{units.count(len(probes), 'probe')} over {units.count(size, 'snapshot')}"
    if outcome == "found":
        page.add(f"First bad snapshot ({ran}):")
        page.fields(
            [
                ("First bad", page.ref(first_bad)),
                ("Sealed at", units.local_time(str(first_bad.get("sealed_at", "")))),
                ("Last good", page.ref(last_good)),
            ]
        )
    elif outcome == "only_skipped_left":
        page.add(
            f"The first bad snapshot is one of these {len(candidates)} ({ran}); the check "
            "skipped the others, so it cannot tell which:"
        )
        page.add(*(f"  {page.style.paint(c[:12], 'yellow')}" for c in candidates))
        page.fields([("Last good", page.ref(last_good)), ("Bad", page.ref(bad))])
    else:
        good_id, bad_id = str(last_good.get("id", ""))[:12], str(bad.get("id", ""))[:12]
        page.add(
            f"Not found yet: stopped by --limit after {ran}, narrowed to "
            f"{units.count(remaining, 'candidate')} between {good_id} and {bad_id} (about "
            f"{units.count(left, 'more probe')} would find it):"
        )
        page.fields([("Last good", page.ref(last_good)), ("Oldest bad", page.ref(bad))])
    if probes:
        page.add("Probes, in the order they ran:")
        page.add(*table(_probe_rows(probes), page.style, indent="  "))
    if following:
        intro = (
            "To go on from there (or run again with a larger --limit), run:"
            if outcome == "limit_reached"
            else "To see what changed between them, run:"
        )
        page.next(intro, str(following))


RENDERERS: dict[str, Callable[[Page], None]] = {"bisect.run": _bisect}
