"""`till project hydrate | flush` for scripts: real `till` processes over a real SQLite table
(and a folder collection), the flush report read back from `--json`."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Till

ENTRIES = {"notes.md": "first notes\n", "a/b.txt": "bee\n", "keep.md": "kept\n"}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_table(db: Path, table: str, entries: dict[str, str]) -> None:
    """A table in the layout SqliteCollection uses, holding `entries` (as another program
    would have written them)."""
    conn = sqlite3.connect(db)
    conn.execute(
        f"CREATE TABLE {table}(key TEXT PRIMARY KEY, content BLOB NOT NULL, state TEXT, "
        "updated_ns INTEGER)"
    )
    conn.executemany(
        f"INSERT INTO {table}(key, content) VALUES (?, ?)",
        [(k, v.encode()) for k, v in entries.items()],
    )
    conn.commit()
    conn.close()


def table_rows(db: Path, table: str) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return {k: bytes(c).decode() for k, c in conn.execute(f"SELECT key, content FROM {table}")}
    finally:
        conn.close()


def set_row(db: Path, table: str, key: str, content: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE {table} SET content=? WHERE key=?", (content.encode(), key))
    conn.commit()
    conn.close()


def files(root: Path) -> dict[str, str]:
    """Every file below `root` and its text."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath, name)
            out[path.relative_to(root).as_posix()] = path.read_text()
    return out


def kinds(doc: dict[str, object]) -> dict[str, str]:
    outcomes = doc["outcomes"]
    assert isinstance(outcomes, list)
    return {o["path"]: o["kind"] for o in outcomes}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """runs.db beside the folder, with ENTRIES and a metadata key in table `art`."""
    path = tmp_path / "home" / "runs.db"
    make_table(path, "art", {**ENTRIES, "_meta": "not a file"})
    return path


MOUNT = "art=sqlite:../runs.db#art"  # relative to the folder (the fixture's cwd)


def test_hydrate_lays_the_tables_entries_down_and_keeps_its_record_out_of_the_folder(
    till: Till, folder: Path, db: Path
) -> None:
    doc = till.json("project", "hydrate", "--mount", MOUNT)
    uri = f"sqlite:{db}#art"
    assert doc == {
        "place": str(folder),
        "mounts": [{"prefix": "art", "collection": uri, "writable": True, "entries": 3}],
        "files": 3,
    }
    # Only the entries: no metadata key, no record of the projection.
    assert files(folder) == {f"art/{k}": v for k, v in ENTRIES.items()}
    records = list((till.home / "projections").glob("*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["folder"] == str(folder)
    assert record["mounts"] == [{"prefix": "art", "uri": uri, "writable": True}]
    assert record["baseline"] == {f"art/{k}": sha(v) for k, v in ENTRIES.items()}
    # Nothing else of a store is made: projections/ is all there is under the home.
    assert sorted(p.name for p in till.home.iterdir()) == ["projections"]


def test_a_flush_lands_edits_additions_and_deletions_and_a_second_flush_is_all_unchanged(
    till: Till, folder: Path, db: Path
) -> None:
    till.json("project", "hydrate", "--mount", MOUNT)
    (folder / "art" / "notes.md").write_text("second notes\n")
    (folder / "art" / "new" / "idea.md").parent.mkdir()
    (folder / "art" / "new" / "idea.md").write_text("an idea\n")
    (folder / "art" / "a" / "b.txt").unlink()

    run = till("--json", "project", "flush")  # no flags: the hydrate's mounts
    assert run.code == 0, run.stderr
    doc = run.doc
    assert kinds(doc) == {
        "art/notes.md": "written",
        "art/new/idea.md": "created",
        "art/a/b.txt": "deleted",
        "art/keep.md": "unchanged",
    }
    assert doc["counts"] == {"written": 1, "created": 1, "deleted": 1, "unchanged": 1}
    assert doc["conflicts"] == [] and doc["contested"] == []
    written = next(o for o in doc["outcomes"] if o["kind"] == "written")
    assert (written["base"], written["theirs"], written["ours"]) == (
        sha("first notes\n"),
        sha("first notes\n"),
        sha("second notes\n"),
    )
    assert table_rows(db, "art") == {
        "notes.md": "second notes\n",
        "new/idea.md": "an idea\n",
        "keep.md": "kept\n",
        "_meta": "not a file",
    }

    again = till.json("project", "flush")
    assert set(kinds(again).values()) == {"unchanged"}
    assert again["counts"] == {"unchanged": 3}


def test_a_change_to_the_table_since_the_hydrate_is_a_conflict_with_three_hashes(
    till: Till, folder: Path, db: Path
) -> None:
    till.json("project", "hydrate", "--mount", MOUNT)
    (folder / "art" / "notes.md").write_text("ours\n")
    (folder / "art" / "keep.md").write_text("kept, edited\n")
    set_row(db, "art", "notes.md", "theirs\n")

    run = till("--json", "project", "flush")
    assert run.code == 0, "a conflict is a report, not a failure"
    doc = run.doc
    conflict = {
        "kind": "conflict",
        "path": "art/notes.md",
        "base": sha("first notes\n"),
        "theirs": sha("theirs\n"),
        "ours": sha("ours\n"),
        "prefix": None,
    }
    assert doc["conflicts"] == [conflict]
    assert conflict in doc["outcomes"]
    assert kinds(doc)["art/keep.md"] == "written", "everything uncontested still lands"
    assert table_rows(db, "art")["notes.md"] == "theirs\n"
    assert (folder / "art" / "notes.md").read_text() == "ours\n"

    # The base is kept, so the next flush asks again; a person is told what to do.
    human = till("project", "flush")
    assert human.code == 0, human.stderr
    assert "1 conflict" in human.stdout and "art/notes.md" in human.stdout
    assert sha("first notes\n")[:12] in human.stdout and sha("theirs\n")[:12] in human.stdout
    assert f"till --repo {folder} project hydrate" in human.stdout
    assert "1 unchanged" not in human.stdout and "2 files unchanged." in human.stdout


def test_a_second_hydrate_keeps_ownership_of_an_entry_removed_since_so_an_edit_conflicts(
    till: Till, folder: Path, db: Path
) -> None:
    till.json("project", "hydrate", "--mount", MOUNT)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM art WHERE key='keep.md'")
    conn.commit()
    conn.close()
    till.json("project", "hydrate")  # the recorded mounts; the file it laid down stays
    (folder / "art" / "keep.md").write_text("edited after someone removed it\n")
    doc = till.json("project", "flush")
    assert doc["conflicts"] == [
        {
            "kind": "conflict",
            "path": "art/keep.md",
            "base": sha("kept\n"),
            "theirs": None,
            "ours": sha("edited after someone removed it\n"),
            "prefix": None,
        }
    ], "never a silent re-creation of an entry someone removed"
    assert "keep.md" not in table_rows(db, "art")


def test_read_only_mounts_are_left_alone_and_files_outside_every_mount_are_never_orphans(
    till: Till, folder: Path, db: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "intro.md").write_text("read me\n")
    doc = till.json("project", "hydrate", "--mount", MOUNT, "--read-only", "ref=dir:../../docs")
    assert [(m["prefix"], m["writable"], m["entries"]) for m in doc["mounts"]] == [
        ("art", True, 3),
        ("ref", False, 1),
    ]
    assert (folder / "ref" / "guide" / "intro.md").read_text() == "read me\n"
    (folder / "ref" / "guide" / "intro.md").write_text("scribbled\n")
    (folder / "ref" / "added.md").write_text("new under a read-only mount\n")
    (folder / "stray.txt").write_text("outside\n")
    (folder / "art-old").mkdir()
    (folder / "art-old" / "x.md").write_text("not under art/\n")
    (folder / "art" / "_scratch.md").write_text("a metadata name: no mount takes it\n")

    flushed = till.json("project", "flush")
    assert kinds(flushed) == {
        "art/notes.md": "unchanged",
        "art/a/b.txt": "unchanged",
        "art/keep.md": "unchanged",
        "art/_scratch.md": "orphan",
    }, "stray.txt and art-old/x.md are outside every mount: nothing a flush decides"
    assert files(docs) == {"guide/intro.md": "read me\n"}
    assert table_rows(db, "art") == {**ENTRIES, "_meta": "not a file"}
    human = till("project", "flush").stdout
    assert "1 orphan" in human and "_scratch.md" in human and "stray.txt" not in human


def test_a_folder_collection_works_both_ways(till: Till, folder: Path, tmp_path: Path) -> None:
    coll = tmp_path / "coll"
    (coll / "d").mkdir(parents=True)
    (coll / "d" / "one.txt").write_text("one\n")
    till.json("project", "hydrate", "--mount", f"data=dir:{coll}")
    assert files(folder) == {"data/d/one.txt": "one\n"}
    (folder / "data" / "d" / "one.txt").write_text("uno\n")
    (folder / "data" / "two.txt").write_text("dos\n")
    doc = till.json("project", "flush", "--mount", f"data=dir:{coll}")
    assert kinds(doc) == {"data/d/one.txt": "written", "data/two.txt": "created"}
    assert (coll / "d" / "one.txt").read_text() == "uno\n"
    assert (coll / "two.txt").read_text() == "dos\n"
    state = json.loads((coll / "_state" / "two.txt.json").read_text())
    assert state["path"] == "data/two.txt" and state["hash"] == sha("dos\n")


def test_human_pages_say_what_was_laid_down_and_what_landed(
    till: Till, folder: Path, db: Path
) -> None:
    run = till("project", "hydrate", "--mount", MOUNT)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"Hydrated {folder}: 3 files from 1 collection.")
    assert "3 entries" in run.stdout and f"sqlite:{db}#art" in run.stdout
    assert f"till --repo {folder} project flush" in run.stdout
    (folder / "art" / "notes.md").write_text("edited\n")
    (folder / "art" / "keep.md").unlink()
    page = till("project", "flush").stdout
    lines = page.splitlines()
    assert lines[0] == f"Flushed {folder}: 1 written, 1 deleted."
    assert [x.split() for x in lines[1:3]] == [
        ["written", "art/notes.md"],
        ["deleted", "art/keep.md"],
    ]
    assert "1 file unchanged." in page
    assert "art/a/b.txt" not in page, "unchanged paths are counted, not listed"
    assert till("project", "flush").stdout.startswith(f"Nothing to flush from {folder}")


BAD_MOUNTS = [
    ("--mount", "art"),  # no PREFIX=
    ("--mount", "art=ftp:x"),  # unknown scheme
    ("--mount", "art=sqlite:../runs.db#bad-name"),  # not a table name
    ("--mount", "art=sqlite:"),  # no path
    ("--mount", "art=sqlite://host/x.db"),
    ("--mount", "../up=sqlite:../runs.db#art"),  # a prefix leaving the folder
    ("--mount", ".tillage=sqlite:../runs.db#art"),
    ("--read-only", "art=dir:."),  # the folder itself
]


def test_bad_mounts_are_invalid_arguments_that_change_nothing(
    till: Till, folder: Path, db: Path
) -> None:
    (folder / "mine.txt").write_text("untouched\n")
    before = files(folder)
    cases = [list(case) for case in BAD_MOUNTS]
    cases.append(["--mount", MOUNT, "--read-only", "other=sqlite:../runs.db#art"])  # twice
    cases.append(["--mount", MOUNT, "--mount", "art=sqlite:../other.db"])  # one prefix twice
    for verb in ("hydrate", "flush"):
        for args in cases:
            run = till("--json", "project", verb, *args)
            assert run.code == 1, (args, run.stdout, run.stderr)
            error = run.error
            assert (error["code"], error["name"]) == (-32066, "projection.bad_mount"), args
            assert "PREFIX=sqlite:PATH#TABLE" in error["next"]
    assert files(folder) == before
    assert not till.home.exists()
    assert table_rows(db, "art") == {**ENTRIES, "_meta": "not a file"}
    assert not (db.parent / "other.db").exists()
    plain = till("project", "hydrate", "--mount", "art=ftp:x")
    assert plain.code == 1 and plain.stdout == ""
    assert "[projection.bad_mount -32066]" in plain.stderr


def test_a_missing_folder_and_a_folder_never_hydrated_are_told_apart(
    till: Till, folder: Path, db: Path, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    for verb in ("hydrate", "flush"):
        run = till("--json", "--repo", str(gone), "project", verb, "--mount", f"art=sqlite:{db}")
        assert run.code == 1
        assert (run.error["code"], run.error["name"]) == (-32066, "workspace.folder_missing")
    assert not gone.exists() and not till.home.exists()
    run = till("--json", "project", "flush")
    assert (run.error["code"], run.error["name"]) == (-32066, "projection.no_mounts")
    assert "till project hydrate" in run.error["next"] and "--mount" in run.error["next"]


def test_a_collection_that_fails_is_an_error_and_the_files_stay(
    till: Till, folder: Path, db: Path
) -> None:
    till.json("project", "hydrate", "--mount", MOUNT)
    (folder / "art" / "notes.md").write_text("work\n")
    db.write_bytes(b"this is not a database, it is long enough to be read as a header" * 4)
    run = till("--json", "project", "flush")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32251, "projection.collection_failed")
    assert f"sqlite:{db}#art" in run.error["message"]
    assert (folder / "art" / "notes.md").read_text() == "work\n"


def test_a_symlink_where_a_mount_goes_is_refused_and_not_followed(
    till: Till, folder: Path, db: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "art").symlink_to(outside)
    run = till("--json", "project", "hydrate", "--mount", MOUNT)
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32066, "projection.unsafe_path")
    assert list(outside.iterdir()) == []


def test_a_database_kept_inside_the_folder_is_not_an_orphan(till: Till, folder: Path) -> None:
    make_table(folder / "runs.db", "t", {"x.md": "x\n"})
    till.json("project", "hydrate", "--mount", "=sqlite:runs.db#t")  # the whole folder
    assert (folder / "x.md").read_text() == "x\n"
    (folder / "y.md").write_text("y\n")
    doc = till.json("project", "flush")
    assert kinds(doc) == {"x.md": "unchanged", "y.md": "created"}
    assert table_rows(folder / "runs.db", "t") == {"x.md": "x\n", "y.md": "y\n"}


def test_project_alone_is_a_usage_error_and_its_help_names_both_commands(till: Till) -> None:
    run = till("project")
    assert run.code == 2 and "SUBCOMMAND" in run.stderr
    group = till("project", "--help")
    assert group.code == 0 and "hydrate" in group.stdout and "flush" in group.stdout
    flush = till("project", "flush", "--help")
    assert flush.stdout.startswith("usage: till project flush")
    assert "--mount PREFIX=URI" in flush.stdout and "--read-only PREFIX=URI" in flush.stdout
