"""(issue 26) `till budget` shows or sets the budget and removes nothing: showing is a read,
and a budget set below what the store holds is enforced by `till gc --yes` (after a
`--dry-run` that names what it would remove), never by the setting nor by the next seal."""

from __future__ import annotations

import random
from pathlib import Path

from tests.conftest import Till
from tests.lifecycle.test_gc import DAY, HOUR, T0, at, timeline


def _log(till: Till) -> bytes:
    return (till.home / "log" / "publication.log").read_bytes()


def _history(till: Till, folder: Path, days: int) -> list[str]:
    """A snapshot a day of 300 kB of fresh bytes; the IDs, oldest first."""
    rng = random.Random(26)
    ids = []
    for n in range(days):
        (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
        if n == 0:
            ids.append(till.json("watch", "--no-daemon", env=at(T0))["head"]["id"])
        else:
            ids.append(till.json("snap", env=at(T0 + n * DAY))["snapshot"]["id"])
    return ids


def test_budget_without_flags_only_shows_even_over_budget(till: Till, folder: Path) -> None:
    """A store left over its budget (it could not get under when a gc last tried, and small
    seals since did not grow it enough to try again): showing the budget must not gc it."""
    rng = random.Random(7)
    (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
    till.json("watch", "--no-daemon", env=at(T0))
    till.json("budget", "--max", "10k", env=at(T0))
    till.json("gc", "--yes", env=at(T0))  # only the head: it cannot get under
    for n in range(1, 4):  # small seals: under the regrowth a seal's check waits for
        (folder / "note.txt").write_text(f"note {n}\n")
        till.json("snap", env=at(T0 + n * DAY))
    before, log = {s["id"] for s in timeline(till)}, _log(till)
    assert len(before) == 4

    shown = till.json("budget", env=at(T0 + 4 * DAY))

    assert shown["over_budget"] is True
    assert {s["id"] for s in timeline(till)} == before
    assert _log(till) == log  # no gc, no setting: nothing published
    assert "`till gc --dry-run`" in shown["next"] and "`till gc --yes`" in shown["next"]


def test_a_budget_set_below_the_store_removes_nothing_until_gc_yes(
    till: Till, folder: Path
) -> None:
    ids = _history(till, folder, 6)

    doc = till.json("budget", "--max", "1m", env=at(T0 + 6 * DAY))

    assert [s["id"] for s in timeline(till)][::-1] == ids
    assert doc["max_bytes"] == 1 << 20 and doc["over_budget"] is True
    assert "`till gc --dry-run`" in doc["next"] and "`till gc --yes`" in doc["next"]
    # Nor does the next seal: it keeps the limits seals kept before.
    (folder / "note.txt").write_text("one more\n")
    ids.append(till.json("snap", env=at(T0 + 6 * DAY + HOUR))["snapshot"]["id"])
    assert [s["id"] for s in timeline(till)][::-1] == ids
    # The dry run names what getting under would remove, and changes nothing.
    log = _log(till)
    dry = till.json("gc", "--dry-run", env=at(T0 + 6 * DAY + HOUR))
    assert dry["snapshots_removed"] >= 3 and ids[-1] not in dry["removed"]
    assert dry["store_bytes_after"] <= 1 << 20
    assert _log(till) == log and len(timeline(till)) == 7
    # Confirmed, it gets under; and from then on seals keep it under by themselves.
    done = till.json("gc", "--yes", env=at(T0 + 6 * DAY + HOUR))
    assert set(done["removed"]) == set(dry["removed"])
    after = till.json("budget")
    assert after["over_budget"] is False and after["next"] is None
    rng = random.Random(8)
    for n in range(2, 6):
        (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
        till.json("snap", env=at(T0 + 6 * DAY + n * HOUR))
    assert till.json("budget")["over_budget"] is False
