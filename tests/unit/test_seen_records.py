"""What this machine remembers of remotes' refs, read back as the snapshots it was told of."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from tillage.features.sync.seen import told_snapshots


def _remember(home: Path, name: str, doc: object) -> None:
    folder = home / "remotes" / "seen" / "a1b2"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))


def test_only_snapshot_ids_are_told_whatever_a_memory_lacks_or_holds(tmp_path: Path) -> None:
    """A memory with no snapshot (an accepted loss) names none, not the snapshot "None"; odd
    history items and damaged files are passed over."""
    _remember(tmp_path, "ref1.json", {"snapshot": "aa" * 32, "history": ["bb" * 32, 7, None]})
    _remember(tmp_path, "ref2.json", {"accepted": {"version": None, "snapshot": None}})
    _remember(tmp_path, "ref3.json", ["not", "a", "memory"])
    (tmp_path / "remotes" / "seen" / "a1b2" / "ref4.json").write_bytes(b"{torn")
    store = cast(Any, SimpleNamespace(home=tmp_path))
    assert told_snapshots(store) == {"aa" * 32, "bb" * 32}
