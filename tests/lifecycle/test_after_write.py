"""The budget is checked once per write (features/after_write.py), never once per seal inside
one: a merge seals twice and checks once, a read checks nothing, and the library's own seal
never collects."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Till
from tillage.features.lifecycle import budget
from tillage.workspace.attach import attach
from tillage.workspace.seal import SealOptions, seal_result


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every budget check made in this process, by the store it checked."""
    seen: list[str] = []
    real = budget.check_after_write

    def counting(store: object) -> object:
        seen.append(str(getattr(store, "home", "")))
        return real(store)  # type: ignore[arg-type]

    monkeypatch.setattr(budget, "check_after_write", counting)
    return seen


def test_a_merge_of_a_fork_checks_the_budget_once(
    till: Till, folder: Path, checks: list[str]
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "alpha")
    (folder.parent / f"{folder.name}.forks" / "alpha" / "b.txt").write_text("b\n")
    (folder / "c.txt").write_text("c\n")
    checks.clear()
    merged = till.json("merge", "alpha")
    assert merged["landed"] is True
    assert len(checks) == 1  # two seals (pre_merge, merge) and the fork's, one check


def test_a_read_checks_nothing_and_a_snap_checks_once(
    till: Till, folder: Path, checks: list[str]
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    checks.clear()
    till.json("status")
    till.json("timeline")
    assert checks == []
    (folder / "a.txt").write_text("changed\n")
    till.json("snap")
    assert len(checks) == 1


def test_a_seal_through_the_library_never_collects(tmp_path: Path, checks: list[str]) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    ws = attach(tmp_path / "store", folder, None).workspace
    try:
        assert seal_result(ws, SealOptions(trigger="manual")).added
    finally:
        ws.store.close()
    assert checks == []
