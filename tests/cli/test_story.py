"""The headline: an agent wrecks a workspace, tillage brings it back byte-exact, and undoes that."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import Till
from tests.helpers import git, make_project, manifest, rows


def test_a_wrecked_workspace_comes_back_byte_exact_and_the_rewind_can_be_undone(
    till: Till, folder: Path
) -> None:
    make_project(folder)
    head = till.json("watch", "--no-daemon")["head"]
    assert head["trigger"] == "initial" and head["grade"] == "exact"
    before = manifest(folder)

    # The agent's afternoon: git clean -fdx, a corrupted database, rewritten files.
    git(folder, "clean", "-fdxq")
    assert not (folder / ".env").exists() and not (folder / ".tillage").exists()
    (folder / "src" / "pkg" / "app.py").write_text("broken\n")
    (folder / "dev.db").write_bytes(b"not a database any more")
    wrecked = manifest(folder)

    preview = till.json("rewind", head["id"][:8], "--dry-run")
    assert preview["applied"] is False and preview["undo"] is None
    kinds = {c["path"]: c["kind"] for c in preview["changes"]}
    assert kinds[".env"] == "added" and kinds["src/pkg/app.py"] == "modified"
    assert manifest(folder) == wrecked, "a dry run changed the folder"

    done = till.json("rewind", head["id"], "--yes")
    assert done["applied"] is True and len(done["undo"]) == 64
    assert manifest(folder) == before
    assert rows(folder / "dev.db") == 500

    # The rewind itself is rewindable: its undo snapshot holds the wrecked state.
    till.json("rewind", done["undo"], "--yes")
    assert manifest(folder) == wrecked


def test_a_database_whose_rows_live_only_in_the_wal_comes_back_whole(
    till: Till, folder: Path
) -> None:
    db_path = folder / "app.db"
    writer = sqlite3.connect(db_path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
    writer.executemany("INSERT INTO users(name) VALUES (?)", [(f"u{i}",) for i in range(300)])
    writer.commit()
    assert (folder / "app.db-wal").stat().st_size > 0
    snap = till.json("watch", "--no-daemon")["head"]
    writer.execute("DELETE FROM users")
    writer.commit()
    writer.close()

    till.json("rewind", snap["id"], "--yes")
    assert not (folder / "app.db-wal").exists() or (folder / "app.db-wal").stat().st_size == 0
    assert rows(db_path) == 300
