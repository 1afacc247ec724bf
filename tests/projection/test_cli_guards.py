"""`till project` never loses a run's work: a hydrate refuses to overwrite unflushed edits, and
a flush refuses a folder that is not the one hydrated."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.conftest import Till


def _table(db: Path, rows: dict[str, str]) -> None:
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS notes(key TEXT PRIMARY KEY, content BLOB NOT NULL, "
        "state TEXT, updated_ns INTEGER)"
    )
    for k, v in rows.items():
        conn.execute("INSERT OR REPLACE INTO notes(key, content) VALUES (?, ?)", (k, v.encode()))
    conn.commit()
    conn.close()


def _rows(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return {k: bytes(v).decode() for k, v in conn.execute("SELECT key, content FROM notes")}
    finally:
        conn.close()


def test_a_second_hydrate_refuses_to_overwrite_edits_not_flushed(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "agent.db"
    _table(db, {"a.md": "one", "b.md": "bee"})
    mount = f"n=sqlite:{db}#notes"
    till.json("project", "hydrate", "--mount", mount)
    (folder / "n" / "a.md").write_text("edited, not flushed")
    _table(db, {"a.md": "two"})  # someone changed the entry meanwhile
    run = till("--json", "project", "hydrate", "--mount", mount)
    assert run.code == 1
    assert run.error["name"] == "projection.unflushed_edits"
    assert run.error["details"]["paths"] == ["n/a.md"]
    assert (folder / "n" / "a.md").read_text() == "edited, not flushed", "nothing written"
    flushed = till.json("project", "flush")
    assert [c["path"] for c in flushed["conflicts"]] == ["n/a.md"]
    (folder / "n" / "a.md").write_text("one")  # the run goes back to what it was given
    till.json("project", "hydrate")  # unedited since the last commit: replaced, fine
    assert (folder / "n" / "a.md").read_text() == "two"


def test_a_flush_refuses_a_folder_made_again_and_deletes_nothing(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "agent.db"
    _table(db, {"a.md": "one", "b.md": "bee"})
    till.json("project", "hydrate", "--mount", f"n=sqlite:{db}#notes")
    shutil.rmtree(folder)
    folder.mkdir()
    run = till("--json", "project", "flush")
    assert run.code == 1 and run.error["name"] == "projection.place_replaced"
    assert _rows(db) == {"a.md": "one", "b.md": "bee"}
