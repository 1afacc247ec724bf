"""`till mcp --list` in a folder that offers no tools says why, and what attaches it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till

pytestmark = pytest.mark.process


def _listed(till: Till) -> Any:
    run = till("--json", "mcp", "--list", process=True)
    assert run.code == 0, (run.stdout, run.stderr)
    return run.doc


def test_an_unattached_folder_says_why_it_offers_no_tools_and_how_to_attach_it(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a")
    doc = _listed(till)
    assert (doc["attached"], doc["tools"]) == (False, [])
    assert doc["reason"] == f"{folder} is not attached to tillage"
    assert "till watch" in doc["next"]
    page = till("mcp", "--list", process=True)
    assert page.code == 0
    assert "attached: no" in page.stdout
    assert f"{folder} is not attached to tillage" in page.stdout
    assert "till watch" in page.stdout
    assert not till.home.exists()  # asking attached nothing, made no store


def test_an_attached_folder_has_no_reason(till: Till, folder: Path) -> None:
    till.json("watch", "--no-daemon")
    doc = _listed(till)
    assert doc["attached"] is True and doc["tools"]
    assert (doc["reason"], doc["next"]) == (None, None)
