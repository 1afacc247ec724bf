"""A projection's decisions, path by path, as the seed states them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tillage.projection import (
    ClaimRegistry,
    DuplicateMountError,
    HostPlace,
    MemoryCollection,
    MemoryPlace,
    Mount,
    PlaceUnreadableError,
    Projection,
    claim_key,
    hash_content,
)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def setup(
    artifacts: dict[str, str] | None = None, reference: dict[str, str] | None = None
) -> tuple[Projection, MemoryCollection, MemoryCollection, MemoryPlace]:
    art = MemoryCollection(artifacts or {"notes.md": "n1", "a/b.txt": "b1", "_meta": "m"})
    ref = MemoryCollection(reference or {"guide.md": "g1"})
    place = MemoryPlace()
    projection = Projection(
        [
            Mount("artifacts", art, "col:artifacts", writable=True),
            Mount("reference", ref, "col:reference", writable=False),
        ],
        place,
        ClaimRegistry(),
    )
    return projection, art, ref, place


def kinds(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {o.path: o.kind for o in report.outcomes}


def test_hydrate_lays_entries_down_and_owns_only_writable_ones() -> None:
    projection, _, _, place = setup()
    run(projection.hydrate())
    assert place.snapshot() == {
        "artifacts/notes.md": "n1",
        "artifacts/a/b.txt": "b1",
        "reference/guide.md": "g1",
    }, "metadata keys are never hydrated"
    assert projection.owned_paths() == ["artifacts/a/b.txt", "artifacts/notes.md"]


def test_a_flush_with_no_edits_is_all_unchanged() -> None:
    projection, art, _, _ = setup()
    run(projection.hydrate())
    report = run(projection.flush())
    assert kinds(report) == {"artifacts/a/b.txt": "unchanged", "artifacts/notes.md": "unchanged"}
    assert report.conflicts == [] and report.contested == []
    assert art.as_dict() == {"notes.md": "n1", "a/b.txt": "b1", "_meta": "m"}


def test_every_kind_of_flush_outcome() -> None:
    projection, art, ref, place = setup(
        {"edit.md": "e1", "gone.md": "g1", "both.md": "x1", "same.md": "s1", "kept.md": "k1"}
    )
    run(projection.hydrate())
    run(place.write("artifacts/edit.md", "e2"))  # written
    place.remove("artifacts/gone.md")  # deleted
    run(place.write("artifacts/new.md", "n1"))  # created
    run(place.write("artifacts/both.md", "x2"))  # conflict: the collection changed too
    art.set("both.md", "x3")
    run(place.write("artifacts/same.md", "s2"))  # converged: the collection has it already
    art.set("same.md", "s2")
    run(place.write("reference/guide.md", "edited"))  # read-only: left alone, not reported
    run(place.write("stray.txt", "?"))  # outside every mount: never read, never reported
    run(place.write("artifacts/_scratch.md", "?"))  # orphan: a metadata name no mount takes
    report = run(projection.flush())
    assert kinds(report) == {
        "artifacts/_scratch.md": "orphan",
        "artifacts/both.md": "conflict",
        "artifacts/edit.md": "written",
        "artifacts/gone.md": "deleted",
        "artifacts/kept.md": "unchanged",
        "artifacts/new.md": "created",
        "artifacts/same.md": "converged",
    }
    assert art.as_dict() == {
        "edit.md": "e2",
        "both.md": "x3",
        "same.md": "s2",
        "kept.md": "k1",
        "new.md": "n1",
    }
    assert ref.as_dict() == {"guide.md": "g1"}
    (conflict,) = report.conflicts
    assert (conflict.base, conflict.theirs, conflict.ours) == (
        hash_content("x1"),
        hash_content("x3"),
        hash_content("x2"),
    )
    assert "artifacts/new.md" in projection.owned_paths()
    assert "artifacts/gone.md" not in projection.owned_paths()
    assert art.state("edit.md")["hash"] == hash_content("e2")  # type: ignore[index]
    again = run(projection.flush())
    assert kinds(again)["artifacts/both.md"] == "conflict", "a conflict keeps asking"
    assert kinds(again)["artifacts/new.md"] == "unchanged"


def test_a_deletion_someone_else_edited_is_a_conflict_and_deletes_nothing() -> None:
    projection, art, _, place = setup({"x.md": "1"})
    run(projection.hydrate())
    place.remove("artifacts/x.md")
    art.set("x.md", "2")
    report = run(projection.flush())
    assert kinds(report) == {"artifacts/x.md": "conflict"}
    assert report.conflicts[0].ours is None
    assert art.get("x.md") == "2"


def test_a_projection_without_a_baseline_owns_nothing() -> None:
    art = MemoryCollection({"x.md": "theirs"})
    place = MemoryPlace({"artifacts/x.md": "ours", "artifacts/y.md": "new"})
    projection = Projection([Mount("artifacts", art, "c", True)], place, ClaimRegistry())
    report = run(projection.flush())
    assert kinds(report) == {"artifacts/x.md": "conflict", "artifacts/y.md": "created"}
    assert art.as_dict() == {"x.md": "theirs", "y.md": "new"}
    place.remove("artifacts/y.md")
    assert kinds(run(projection.flush()))["artifacts/y.md"] == "deleted", "created is owned"
    assert art.as_dict() == {"x.md": "theirs"}


def test_routing_takes_the_longest_prefix_on_a_folder_boundary() -> None:
    outer = MemoryCollection({"drafts/d.md": "shadowed", "top.md": "t"})
    inner = MemoryCollection({"d.md": "inner"})
    old = MemoryCollection()
    place = MemoryPlace()
    projection = Projection(
        [
            Mount("artifacts", outer, "outer", True),
            Mount("artifacts/drafts", inner, "inner", True),
            Mount("artifacts-old", old, "old", True),
        ],
        place,
        ClaimRegistry(),
    )
    run(projection.hydrate())
    assert place.snapshot() == {"artifacts/top.md": "t", "artifacts/drafts/d.md": "inner"}
    run(place.write("artifacts/drafts/e.md", "e"))
    run(place.write("artifacts-old/x", "x"))
    report = run(projection.flush())
    assert kinds(report)["artifacts/drafts/e.md"] == "created"
    assert inner.as_dict() == {"d.md": "inner", "e.md": "e"}
    assert old.as_dict() == {"x": "x"} and "drafts/e.md" not in outer.as_dict()


def test_mounting_one_collection_twice_raises() -> None:
    col = MemoryCollection()
    with pytest.raises(DuplicateMountError):
        Projection([Mount("a", col, "same", True), Mount("b", col, "same", True)], MemoryPlace())


def test_put_commits_one_path_and_takes_ownership() -> None:
    projection, art, _, place = setup({"x.md": "1"})
    run(projection.hydrate())
    written = run(projection.put("./artifacts/./x.md", "2"))
    assert written is not None and written.kind == "written" and written.path == "artifacts/x.md"
    created = run(projection.put("artifacts/new.md", "n"))
    assert created is not None and created.kind == "created"
    assert place.snapshot()["artifacts/new.md"] == "n"
    assert art.as_dict() == {"x.md": "2", "new.md": "n"}
    ro = run(projection.put("reference/guide.md", "no"))
    assert ro is not None and (ro.kind, ro.prefix) == ("readonly", "reference")
    assert place.snapshot()["reference/guide.md"] == "g1", "nothing written"
    assert run(projection.put("artifacts/_meta", "m")) is None
    art.set("x.md", "someone else")
    clash = run(projection.put("artifacts/x.md", "3"))
    assert clash is not None and clash.kind == "conflict"
    assert art.get("x.md") == "someone else"
    place.remove("artifacts/new.md")
    assert kinds(run(projection.flush()))["artifacts/new.md"] == "deleted"


def test_a_claim_held_by_another_operation_is_contested_and_writes_nothing() -> None:
    registry = ClaimRegistry()
    art = MemoryCollection({"x.md": "1"})
    place = MemoryPlace()
    projection = Projection([Mount("artifacts", art, "c", True)], place, registry)
    run(projection.hydrate())
    run(place.write("artifacts/x.md", "2"))
    other = object()
    assert registry.try_claim(claim_key("c", "x.md"), other)
    report = run(projection.flush())
    assert kinds(report) == {"artifacts/x.md": "contested"}
    assert report.contested[0].path == "artifacts/x.md" and art.get("x.md") == "1"
    assert registry.holder(claim_key("c", "x.md")) is other, "never another's claim released"
    registry.release(claim_key("c", "x.md"), other)
    assert kinds(run(projection.flush())) == {"artifacts/x.md": "written"}
    assert registry.held() == [], "a flush's claims end with it"


def test_a_put_finishing_never_releases_a_flushs_claims() -> None:
    registry = ClaimRegistry()

    class Slow(MemoryCollection):
        async def write(self, key, content, state):  # type: ignore[no-untyped-def]
            await asyncio.sleep(0.3 if key == "a.md" else 0)
            await super().write(key, content, state)

    art = Slow({"a.md": "1", "b.md": "1"})
    place = MemoryPlace()
    projection = Projection([Mount("artifacts", art, "c", True)], place, registry)

    async def both() -> tuple[object, object]:
        await projection.hydrate()
        await place.write("artifacts/a.md", "2")
        flush = asyncio.create_task(projection.flush())
        await asyncio.sleep(0.01)  # the flush holds a.md's claim, writing
        put = await projection.put("artifacts/b.md", "3")
        held = registry.holder(claim_key("c", "a.md"))
        return (await flush, put, held)  # type: ignore[return-value]

    report, put, held = run(both())  # type: ignore[misc]
    assert held is not None, "the put ended; the flush still held its claim"
    assert put.kind == "written"  # type: ignore[attr-defined]
    assert kinds(report)["artifacts/a.md"] == "written"  # type: ignore[arg-type]


def test_an_unreadable_place_changes_nothing() -> None:
    projection, art, _, place = setup({"x.md": "1"})
    run(projection.hydrate())
    place.remove("artifacts/x.md")
    place.break_listing("disk went away")
    with pytest.raises(PlaceUnreadableError):
        run(projection.flush())
    assert art.as_dict() == {"x.md": "1"} and projection.owned_paths() == ["artifacts/x.md"]


def test_a_host_place_round_trip(tmp_path: Path) -> None:
    art = MemoryCollection({"src/app.py": "print(1)\n", "_index": "meta"})
    place = HostPlace(tmp_path / "run")
    projection = Projection([Mount("work", art, "c", True)], place, ClaimRegistry())
    projection.hydrate_sync()
    assert (tmp_path / "run" / "work" / "src" / "app.py").read_text() == "print(1)\n"
    (tmp_path / "run" / "work" / "src" / "app.py").write_text("print(2)\n")
    (tmp_path / "run" / "work" / "README").write_text("hi\n")
    report = projection.flush_sync()
    assert kinds(report) == {"work/README": "created", "work/src/app.py": "written"}
    assert art.as_dict() == {"src/app.py": "print(2)\n", "README": "hi\n", "_index": "meta"}


def test_tillages_own_folder_in_the_place_is_never_written(tmp_path: Path) -> None:
    art = MemoryCollection({".tillage/workspace.json": "{}", "ok.md": "fine"})
    place = HostPlace(tmp_path / "run")
    projection = Projection([Mount("", art, "c", True)], place, ClaimRegistry())
    projection.hydrate_sync()
    assert not (tmp_path / "run" / ".tillage").exists()
    assert (tmp_path / "run" / "ok.md").read_text() == "fine"
    with pytest.raises(ValueError):
        projection.put_sync(".tillage/workspace.json", "{}")


def test_hydrate_keeping_edits_refuses_before_writing_anything() -> None:
    from tillage.projection import UnflushedEditsError

    projection, art, _, place = setup({"a.md": "1", "b.md": "1"})
    run(projection.hydrate())
    run(place.write("artifacts/a.md", "edited"))
    art.set("a.md", "2")
    art.set("b.md", "2")
    with pytest.raises(UnflushedEditsError) as raised:
        run(projection.hydrate(keep_edits=True))
    assert raised.value.paths == ["artifacts/a.md"]
    assert place.snapshot()["artifacts/b.md"] == "1", "nothing was written"
    run(projection.hydrate())  # without the guard, as the seed's hydrate: laid down whole
    assert place.snapshot()["artifacts/a.md"] == "2"
