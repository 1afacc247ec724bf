"""A fork's record describes its own folder (issue 21, data loss 1): the live copy and the base
sealed beside it can see a parent file at different moments, so the copy is checked against the
base and made equal to it. Merging a fork that changed nothing changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tillage.features.forks import fork as fork_module
from tillage.workspace import seal as seal_module


@pytest.fixture
def edit_between_copy_and_seal(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """The parent's `zz.txt` becomes v1 after the copy took v0 and before the base seal reads
    it: the race `till fork` loses when an edit lands while it copies."""
    copied = threading.Event()
    real_copy, real_seal = fork_module.copy_live, seal_module.seal_result

    def copy_then_tell(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_copy(*args, **kwargs)
        finally:
            copied.set()

    def seal_after_the_edit(ws: Any, options: Any, **kwargs: Any) -> Any:
        if options.trigger == "fork_base":
            assert copied.wait(30)
            (folder / "zz.txt").write_text("v1\n")
        return real_seal(ws, options, **kwargs)

    monkeypatch.setattr(fork_module, "copy_live", copy_then_tell)
    monkeypatch.setattr(seal_module, "seal_result", seal_after_the_edit)


def test_an_edit_made_while_a_fork_is_copied_is_not_reverted_by_merging_it(
    till: Till, folder: Path, edit_between_copy_and_seal: None
) -> None:
    (folder / "zz.txt").write_text("v0\n")
    (folder / "other.txt").write_text("other\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "alpha")
    fork_root = folder.parent / f"{folder.name}.forks" / "alpha"
    # The fork is what its record says: the base, which saw the edit.
    assert (fork_root / "zz.txt").read_text() == "v1\n"
    merged = till.json("merge", "alpha")
    assert (folder / "zz.txt").read_text() == "v1\n"
    assert merged["changes"] == 0
