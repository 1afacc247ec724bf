"""`core` stays pure: no module in it imports anything that does I/O or reads the clock."""

from __future__ import annotations

import ast
from pathlib import Path

import tillage

CORE = Path(tillage.__file__).parent / "core"
FORBIDDEN = {"os", "io", "sqlite3", "subprocess", "socket", "time", "pathlib", "shutil", "sys"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_imports_nothing_that_does_io() -> None:
    offenders = {
        f"{p.name}: {sorted(_imports(p) & FORBIDDEN)}"
        for p in CORE.glob("*.py")
        if _imports(p) & FORBIDDEN
    }
    assert not offenders


def test_the_check_itself_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom pathlib import Path\n")
    assert _imports(bad) & FORBIDDEN == {"os", "pathlib"}
