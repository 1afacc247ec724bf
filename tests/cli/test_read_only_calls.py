"""Calls that only read write nothing: an agent asks `till status` hundreds of times a session,
and a read that dirtied the store's index would cost a disk write every time."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till


def _store_state(home: Path) -> dict[str, tuple[int, int]]:
    """Every file under the store with its size and modification time."""
    return {
        str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def test_status_timeline_and_show_write_nothing_to_the_store(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    head = till.json("watch", "--no-daemon")["head"]["id"]
    till.json("status")  # the first call after a seal may still settle the index
    before = _store_state(till.home)
    for args in (("status",), ("timeline",), ("show", head), ("status",)):
        till.json(*args)
    assert _store_state(till.home) == before
