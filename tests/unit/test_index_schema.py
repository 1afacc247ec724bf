"""An index built by an older version is made anew from the log, whatever columns it lacks;
one that a concurrent first open is still building is left to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tillage.store.store import Store


def test_an_index_of_an_older_schema_is_rebuilt_with_the_new_columns(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.publish("attach", {"workspace": "w1", "root": "/somewhere"})
    store.close()
    old = sqlite3.connect(tmp_path / "index.sqlite")
    old.executescript(
        # Schema 2's snapshots table: no merged_from; no forks or claims tables.
        "DROP TABLE snapshots; DROP TABLE forks; DROP TABLE claims;"
        "CREATE TABLE snapshots(id TEXT PRIMARY KEY, workspace TEXT NOT NULL, seq INT NOT NULL,"
        " sealed_at_ns INT NOT NULL, trigger TEXT NOT NULL, label TEXT, parent TEXT,"
        " tree TEXT NOT NULL, files INT NOT NULL, bytes INT NOT NULL, grade TEXT NOT NULL,"
        " agent TEXT, turn TEXT, session TEXT);"
        "UPDATE meta SET value='2' WHERE key='schema';"
    )
    old.close()
    reopened = Store.open(tmp_path)
    assert reopened.workspace("w1") is not None
    assert reopened.snapshots("w1") == []  # the new columns are there: the query works
    assert reopened.forks_of("w1") == []
    reopened.close()
