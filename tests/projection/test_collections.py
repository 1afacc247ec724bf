"""The three collections (memory, a folder, an SQLite table) behave alike: one suite runs
against each. Then what only one of them promises: the SQLite table made when missing and
shared between objects on one file, the folder refusing keys and links that leave it. Last,
what a flush leaves on every entry it commits: `path`, `hash`, `updated_at`, and a mount's
`entry_state` applied last.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tillage.projection import (
    ClaimRegistry,
    Collection,
    DirectoryCollection,
    MemoryCollection,
    MemoryPlace,
    Mount,
    Projection,
    SqliteCollection,
    UnsafePathError,
    hash_content,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@dataclass(frozen=True)
class Kind:
    """How to make one kind of collection in a folder, and read back an entry's state."""

    name: str
    make: Callable[[Path], Collection]
    state: Callable[[Collection, str], dict[str, Any] | None]

    def __str__(self) -> str:
        return self.name


def _directory_state(collection: Collection, key: str) -> dict[str, Any] | None:
    assert isinstance(collection, DirectoryCollection)
    path = collection.root / "_state" / f"{key}.json"
    return dict(json.loads(path.read_text())) if path.exists() else None


def _state(collection: Collection, key: str) -> dict[str, Any] | None:
    assert isinstance(collection, MemoryCollection | SqliteCollection)
    return collection.state(key)


KINDS = [
    Kind("memory", lambda tmp: MemoryCollection(), _state),
    Kind("directory", lambda tmp: DirectoryCollection(tmp / "collection"), _directory_state),
    Kind("sqlite", lambda tmp: SqliteCollection(tmp / "runs.db", "artifacts"), _state),
]


@pytest.fixture(params=KINDS, ids=str)
def kind(request: pytest.FixtureRequest) -> Kind:
    k: Kind = request.param
    return k


@pytest.fixture
def collection(kind: Kind, tmp_path: Path) -> Collection:
    return kind.make(tmp_path)


STATE = {"path": "art/x.md", "hash": "h", "updated_at": "2026-01-01T00:00:00.000000Z"}


def put_all(collection: Collection, entries: Mapping[str, str]) -> None:
    async def main() -> None:
        for key, content in entries.items():
            await collection.write(key, content, {**STATE, "key": key})

    run(main())


def contents(collection: Collection) -> dict[str, str | None]:
    async def main() -> dict[str, str | None]:
        return {key: await collection.read(key) for key in await collection.list()}

    out: dict[str, str | None] = run(main())
    return out


# -- one suite, three collections -------------------------------------------------------------


def test_a_new_collection_lists_nothing_and_reads_none(collection: Collection) -> None:
    assert run(collection.list()) == []
    assert run(collection.read("x.md")) is None
    assert run(collection.read("a/b/x.md")) is None


def test_entries_round_trip_through_list_read_write_and_delete(collection: Collection) -> None:
    entries = {
        "notes.md": "n1\n",
        "a/b/deep.md": "deep",
        "a/sibling.md": "s",
        "empty.md": "",
        "日本/ü 🙂.md": "é 🙂\r\nline two",
        "_meta": "metadata is listed like any key",
    }
    put_all(collection, entries)
    assert sorted(run(collection.list())) == sorted(entries)
    assert contents(collection) == entries

    put_all(collection, {"notes.md": "n2\n"})
    assert run(collection.read("notes.md")) == "n2\n"
    run(collection.delete("a/b/deep.md"))
    run(collection.delete("never-there.md"))  # no entry: nothing to do
    assert run(collection.read("a/b/deep.md")) is None
    assert sorted(run(collection.list())) == sorted(set(entries) - {"a/b/deep.md"}), (
        "deleting one entry leaves its siblings"
    )


@pytest.mark.parametrize(
    "key", ["a//b.md", "./x.md", "trail/", ".tillage/x.md", "x.tillage-tmp-1.md", "_state/x.md"]
)
def test_a_key_is_listed_and_read_as_written_or_refused(collection: Collection, key: str) -> None:
    """The protocol's `list` is every key: a collection that cannot keep a key as spelled
    (a folder normalizes `a//b.md`, hides `.tillage` and temporary names) refuses it rather
    than storing an entry under another name, or one it will never list."""
    try:
        run(collection.write(key, "v", {}))
    except ValueError:  # UnsafePathError: refused, nothing stored
        assert run(collection.list()) == []
        return
    assert run(collection.list()) == [key]
    assert run(collection.read(key)) == "v"


def test_text_from_bytes_that_were_not_utf8_round_trips(collection: Collection) -> None:
    text = b"caf\xe9 \xff\xfe\x80 ok".decode("utf-8", "surrogateescape")
    put_all(collection, {"latin1.txt": text})
    assert run(collection.read("latin1.txt")) == text


def test_state_is_stored_with_the_entry_replaced_with_it_and_removed_with_it(
    kind: Kind, collection: Collection
) -> None:
    state = {"path": "art/x.md", "hash": "abc", "updated_at": "t", "title": "X", "n": 3}
    run(collection.write("d/x.md", "one", state))
    assert kind.state(collection, "d/x.md") == state

    run(collection.write("d/x.md", "two", {"path": "art/x.md", "hash": "def"}))
    assert kind.state(collection, "d/x.md") == {"path": "art/x.md", "hash": "def"}, (
        "a write replaces the state whole"
    )
    run(collection.delete("d/x.md"))
    assert kind.state(collection, "d/x.md") is None
    assert run(collection.list()) == []


def test_the_same_operations_leave_every_collection_alike(tmp_path: Path) -> None:
    results = []
    for k in KINDS:
        (tmp_path / k.name).mkdir()
        collection = k.make(tmp_path / k.name)
        put_all(collection, {"a.md": "1", "b/c.md": "2", "d.md": "3", "_m": "m"})
        put_all(collection, {"a.md": "one"})
        run(collection.delete("d.md"))
        results.append((sorted(run(collection.list())), contents(collection)))
    assert results[0] == results[1] == results[2]


# -- SQLite ----------------------------------------------------------------------------------


def test_sqlite_creates_its_table_when_missing(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    collection = SqliteCollection(db, "notes")
    assert run(collection.list()) == []
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["notes"]


def test_sqlite_reads_rows_already_in_an_existing_table(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    first = SqliteCollection(db, "notes")
    run(first.write("x.md", "kept", {"path": "x.md"}))
    again = SqliteCollection(db, "notes")  # a new process opening the same file
    assert run(again.list()) == ["x.md"] and run(again.read("x.md")) == "kept"
    assert again.state("x.md") == {"path": "x.md"}


@pytest.mark.parametrize(
    "table", ["", "1st", "a-b", "a b", "x; DROP TABLE y", "t'", 'q"', "ü", "a" * 64]
)
def test_sqlite_refuses_a_bad_table_name(tmp_path: Path, table: str) -> None:
    with pytest.raises(ValueError):
        SqliteCollection(tmp_path / "x.db", table)
    assert not (tmp_path / "x.db").exists(), "refused before the file was touched"


def test_two_sqlite_objects_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    one, two = SqliteCollection(db, "entries"), SqliteCollection(db, "entries")
    run(one.write("a.md", "from one", {"by": 1}))
    assert run(two.read("a.md")) == "from one" and two.state("a.md") == {"by": 1}
    run(two.write("a.md", "from two", {"by": 2}))
    run(two.write("b.md", "b", {}))
    assert run(one.read("a.md")) == "from two" and sorted(run(one.list())) == ["a.md", "b.md"]
    run(one.delete("b.md"))
    assert run(two.list()) == ["a.md"]


def test_two_tables_in_one_file_are_separate_collections(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    left, right = SqliteCollection(db, "left_t"), SqliteCollection(db, "right_t")
    run(left.write("x.md", "left", {}))
    assert run(right.list()) == [] and run(right.read("x.md")) is None


def test_concurrent_sqlite_writes_on_one_loop_all_land(tmp_path: Path) -> None:
    collection = SqliteCollection(tmp_path / "c.db", "entries")

    async def main() -> None:
        await asyncio.gather(*(collection.write(f"k{i}.md", str(i), {"i": i}) for i in range(20)))

    run(main())
    assert contents(collection) == {f"k{i}.md": str(i) for i in range(20)}


# -- a folder ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["../x.md", "/abs.md", "a/../../x.md", "..", ""])
def test_a_folder_collection_refuses_keys_that_leave_it(tmp_path: Path, key: str) -> None:
    collection = DirectoryCollection(tmp_path / "collection")
    with pytest.raises(UnsafePathError):
        run(collection.write(key, "escaped", {}))
    with pytest.raises(UnsafePathError):
        run(collection.read(key))
    with pytest.raises(UnsafePathError):
        run(collection.delete(key))
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_folder_collection_writes_no_file_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret\n")
    collection = DirectoryCollection(tmp_path / "collection")
    root = collection.root
    (root / "file-link.md").symlink_to(outside / "secret.md")
    (root / "dir-link").symlink_to(outside, target_is_directory=True)

    for key in ("file-link.md", "dir-link/secret.md", "dir-link/new.md"):
        with pytest.raises(UnsafePathError):
            run(collection.write(key, "planted\n", {"path": key}))
        with pytest.raises(UnsafePathError):
            run(collection.read(key))
    with pytest.raises(UnsafePathError):
        run(collection.delete("dir-link/secret.md"))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]
    assert (outside / "secret.md").read_text() == "secret\n"
    assert run(collection.list()) == [], "a link is never listed as an entry"


def test_a_folder_collection_writes_no_state_through_a_linked_state_folder(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    collection = DirectoryCollection(tmp_path / "collection")
    (collection.root / "_state").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        run(collection.write("x.md", "x", {"path": "x.md"}))
    assert list(outside.iterdir()) == []


def test_a_folder_collection_keeps_its_state_out_of_its_entries(tmp_path: Path) -> None:
    collection = DirectoryCollection(tmp_path / "collection")
    run(collection.write("a/x.md", "x", {"path": "art/a/x.md"}))
    assert run(collection.list()) == ["a/x.md"]
    assert json.loads((collection.root / "_state" / "a" / "x.md.json").read_text()) == {
        "path": "art/a/x.md"
    }


# -- what a flush commits ----------------------------------------------------------------------


def rfc3339(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def test_a_committed_entry_carries_path_hash_and_updated_at(
    kind: Kind, collection: Collection
) -> None:
    place = MemoryPlace()
    projection = Projection([Mount("art/deep", collection, "c", True)], place, ClaimRegistry())
    started = time.time()
    run(place.write("art/deep/d/x.md", "flushed"))
    run(projection.flush())
    outcome = run(projection.put("art/deep/y.md", "put"))
    assert outcome is not None and outcome.kind == "created"

    for key, content in (("d/x.md", "flushed"), ("y.md", "put")):
        state = kind.state(collection, key)
        assert state is not None
        assert state["path"] == f"art/deep/{key}"
        assert state["hash"] == hash_content(content)
        assert started - 1 <= rfc3339(state["updated_at"]) <= time.time() + 1
        assert state["updated_at"].endswith("Z")


def test_a_mounts_entry_state_is_applied_last_and_overrides(
    kind: Kind, collection: Collection
) -> None:
    def entry_state(key: str) -> dict[str, Any]:
        return {"title": key.upper(), "updated_at": "as the UI wants it", "author": "agent"}

    place = MemoryPlace()
    projection = Projection(
        [Mount("art", collection, "c", True, entry_state=entry_state)], place, ClaimRegistry()
    )
    run(place.write("art/x.md", "one"))
    run(projection.flush())
    assert kind.state(collection, "x.md") == {
        "path": "art/x.md",
        "hash": hash_content("one"),
        "updated_at": "as the UI wants it",
        "title": "X.MD",
        "author": "agent",
    }


def test_a_projection_round_trip_through_each_collection(
    kind: Kind, collection: Collection
) -> None:
    put_all(collection, {"keep.md": "k", "edit.md": "e1", "gone.md": "g", "_meta": "m"})
    place = MemoryPlace()
    projection = Projection([Mount("art", collection, "c", True)], place, ClaimRegistry())
    run(projection.hydrate())
    assert place.snapshot() == {"art/keep.md": "k", "art/edit.md": "e1", "art/gone.md": "g"}
    assert {o.kind for o in run(projection.flush()).outcomes} == {"unchanged"}

    run(place.write("art/edit.md", "e2"))
    place.remove("art/gone.md")
    run(place.write("art/new/n.md", "n"))
    report = run(projection.flush())
    assert {o.path: o.kind for o in report.outcomes} == {
        "art/keep.md": "unchanged",
        "art/edit.md": "written",
        "art/gone.md": "deleted",
        "art/new/n.md": "created",
    }
    assert contents(collection) == {"keep.md": "k", "edit.md": "e2", "new/n.md": "n", "_meta": "m"}
