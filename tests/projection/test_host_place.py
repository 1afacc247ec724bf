"""HostPlace, the real folder an agent works in: it refuses every path that could leave its
root (lexically or through a symlink anywhere in the path) for reads and writes, never writes
through a link, never lists one, replaces files whole, and says when it cannot be listed.
Then the projection's side of that last rule: an unreadable place makes a flush raise
PlaceUnreadableError and change nothing, while a collection's own failure propagates as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tillage.platform.fs import TEMP_MARK
from tillage.projection import (
    ClaimRegistry,
    HostPlace,
    MemoryCollection,
    MemoryPlace,
    Mount,
    PlaceUnreadableError,
    Projection,
    UnsafePathError,
    hash_content,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "place"


@pytest.fixture
def place(root: Path) -> HostPlace:
    return HostPlace(root)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the place, with one file in it, that nothing may reach."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.md").write_text("secret\n")
    return out


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def refused_both_ways(place: HostPlace, path: str) -> None:
    with pytest.raises(UnsafePathError):
        run(place.read(path))
    with pytest.raises(UnsafePathError):
        run(place.write(path, "planted\n"))


# -- refusing paths that leave the root --------------------------------------------------------


def test_the_root_is_created_when_missing(root: Path) -> None:
    assert not root.exists()
    HostPlace(root / "deeper")
    assert (root / "deeper").is_dir()


@pytest.mark.parametrize("path", ["/etc/passwd", "/x.md", "//x.md"])
def test_an_absolute_path_is_refused(place: HostPlace, root: Path, path: str) -> None:
    refused_both_ways(place, path)
    assert files_under(root) == {}


@pytest.mark.parametrize("path", ["..", "../x.md", "a/../../x.md", "a/..", "./../x.md", "a/../b"])
def test_a_dotdot_path_is_refused(place: HostPlace, root: Path, path: str) -> None:
    refused_both_ways(place, path)
    assert files_under(root.parent) == {}


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_symlink_at_the_file_is_refused_and_never_written_through(
    place: HostPlace, root: Path, outside: Path, where: str
) -> None:
    (root / "real.md").write_text("real\n")
    target = root / "real.md" if where == "inside" else outside / "secret.md"
    (root / "link.md").symlink_to(target)
    before = target.read_text()

    refused_both_ways(place, "link.md")
    assert target.read_text() == before, "the link's target is untouched"
    assert (root / "link.md").is_symlink(), "the link itself is not replaced either"
    assert (outside / "secret.md").read_text() == "secret\n"
    assert (root / "real.md").read_text() == "real\n"


def test_a_dangling_symlink_is_refused_and_its_target_never_created(
    place: HostPlace, root: Path, outside: Path
) -> None:
    (root / "dangling.md").symlink_to(outside / "planted.md")
    refused_both_ways(place, "dangling.md")
    assert not (outside / "planted.md").exists()


@pytest.mark.parametrize("where", ["inside", "outside"])
@pytest.mark.parametrize("depth", ["d", "a/d"])
def test_a_symlink_at_any_parent_folder_is_refused_and_never_written_through(
    place: HostPlace, root: Path, outside: Path, where: str, depth: str
) -> None:
    (root / "real").mkdir()
    (root / "real" / "secret.md").write_text("inside\n")
    target = root / "real" if where == "inside" else outside
    link = root / depth
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    before = files_under(target)

    for path in (f"{depth}/secret.md", f"{depth}/new.md", f"{depth}/deeper/new.md"):
        refused_both_ways(place, path)
    assert files_under(target) == before, "nothing written through the link"
    assert not (target / "deeper").exists(), "no folder created through the link"


def test_a_symlink_planted_under_an_existing_folder_is_refused(
    place: HostPlace, root: Path, outside: Path
) -> None:
    run(place.write("a/b/c.md", "c\n"))
    shutil.rmtree(root / "a" / "b")
    (root / "a" / "b").symlink_to(outside, target_is_directory=True)
    refused_both_ways(place, "a/b/secret.md")
    refused_both_ways(place, "a/b/c.md")
    assert files_under(outside) == {"secret.md": b"secret\n"}


def test_a_file_where_a_folder_belongs_is_refused_not_replaced(
    place: HostPlace, root: Path
) -> None:
    run(place.write("a.md", "a\n"))
    with pytest.raises(UnsafePathError):
        run(place.write("a.md/b.md", "b\n"))
    with contextlib.suppress(UnsafePathError):  # refused, or nothing lives under a file
        assert run(place.read("a.md/b.md")) is None
    assert (root / "a.md").read_text() == "a\n"


def test_a_folder_is_not_replaced_by_a_file(place: HostPlace, root: Path) -> None:
    run(place.write("d/x.md", "x\n"))
    with pytest.raises(UnsafePathError):
        run(place.write("d", "a file\n"))
    assert (root / "d" / "x.md").read_text() == "x\n"
    assert run(place.read("d")) is None, "a folder is no file's content"


# -- listing -----------------------------------------------------------------------------------


def test_listing_never_shows_a_symlink_and_never_descends_through_one(
    place: HostPlace, root: Path, outside: Path
) -> None:
    run(place.write("f.md", "f\n"))
    run(place.write("real/g.md", "g\n"))
    (root / "file-link.md").symlink_to(root / "f.md")
    (root / "out-link.md").symlink_to(outside / "secret.md")
    (root / "dir-link").symlink_to(root / "real", target_is_directory=True)
    (root / "real" / "out-dir").symlink_to(outside, target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "nowhere.md")

    assert run(place.list([""])) == ["f.md", "real/g.md"]
    assert run(place.list(["real"])) == ["real/g.md"]
    for prefix in ("dir-link", "real/out-dir"):
        try:
            listed = run(place.list([prefix]))
        except UnsafePathError:
            continue
        assert listed == [], f"listed through the link at {prefix}"


def test_a_missing_file_reads_as_none(place: HostPlace) -> None:
    assert run(place.read("nothing.md")) is None
    assert run(place.read("no/such/folder/x.md")) is None


def test_a_fifo_reads_as_no_file_without_waiting_for_a_writer(place: HostPlace, root: Path) -> None:
    """An agent can plant a named pipe where a file was; opening it to read blocks until
    someone writes, which would hang a flush. It is no regular file: it reads as None."""
    os.mkfifo(root / "pipe.md")
    result: list[str | None] = []
    reader = threading.Thread(target=lambda: result.append(run(place.read("pipe.md"))))
    reader.start()
    reader.join(timeout=3)
    if reader.is_alive():  # release the blocked reader before failing
        os.close(os.open(root / "pipe.md", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=5)
        pytest.fail("reading a named pipe waited for a writer")
    assert result == [None]
    assert run(place.list([""])) == [], "a pipe is never listed"


def test_a_prefix_never_created_lists_as_empty(place: HostPlace) -> None:
    run(place.write("a/x.md", "x\n"))
    assert run(place.list(["never"])) == []
    assert run(place.list(["never/deeper", "a"])) == ["a/x.md"]
    assert run(place.list(["a/x.md"])) == [], "a file is not a prefix"


def test_listing_an_empty_root_is_empty_and_a_removed_root_raises(
    place: HostPlace, root: Path
) -> None:
    assert run(place.list([""])) == []
    shutil.rmtree(root)
    with pytest.raises(OSError):
        run(place.list([""]))
    with pytest.raises(OSError):
        run(place.list(["a"]))


def test_the_tillage_folder_at_the_root_is_never_listed(place: HostPlace, root: Path) -> None:
    (root / ".tillage").mkdir(parents=True)
    (root / ".tillage" / "state.json").write_text("{}")
    run(place.write("x.md", "x\n"))
    assert run(place.list([""])) == ["x.md"]


def test_listing_takes_prefixes_together_without_repeats(place: HostPlace) -> None:
    for path in ("a/x.md", "a/b/y.md", "c/z.md", "top.md"):
        run(place.write(path, path))
    assert run(place.list(["a", "a/b", "c"])) == ["a/b/y.md", "a/x.md", "c/z.md"]
    assert run(place.list([""])) == ["a/b/y.md", "a/x.md", "c/z.md", "top.md"]


# -- writes --------------------------------------------------------------------------------------


def test_a_write_replaces_the_file_whole(
    place: HostPlace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(place.write("d/x.md", "old content\n"))
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any, **kwargs: Any) -> None:
        renames.append((os.fsdecode(src), os.fsdecode(dst)))
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", spy)
    with open(root / "d" / "x.md", "rb") as reader:
        run(place.write("d/x.md", "new content\n"))
        assert reader.read() == b"old content\n", "a reader holding the old file sees it whole"
    assert (root / "d" / "x.md").read_text() == "new content\n"
    assert len(renames) == 1 and TEMP_MARK in renames[0][0] and renames[0][1] == "x.md"
    assert os.listdir(root / "d") == ["x.md"], "no temporary file left behind"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    place: HostPlace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(place.write("x.md", "old\n"))

    def full(fd: int, data: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        run(place.write("x.md", "new\n"))
    monkeypatch.undo()
    assert (root / "x.md").read_text() == "old\n"
    assert os.listdir(root) == ["x.md"]


def test_a_leftover_temporary_is_never_listed(place: HostPlace, root: Path) -> None:
    run(place.write("x.md", "x\n"))
    (root / f".x.md{TEMP_MARK}dead").write_text("half")
    assert run(place.list([""])) == ["x.md"]


def test_bytes_that_are_not_utf8_survive_a_read_and_write_round_trip(
    place: HostPlace, root: Path
) -> None:
    raw = b"caf\xe9 \xff\xfe\x80 ok \xc3\xa9\n\x00end"
    (root / "latin1.txt").write_bytes(raw)
    text = run(place.read("latin1.txt"))
    assert isinstance(text, str)
    run(place.write("copy/latin1.txt", text))
    assert (root / "copy" / "latin1.txt").read_bytes() == raw
    assert hash_content(text) == hashlib.sha256(raw).hexdigest(), "hashed as the bytes"


def test_empty_and_unicode_content_and_names_round_trip(place: HostPlace, root: Path) -> None:
    run(place.write("日本/ü 🙂.md", ""))
    run(place.write("日本/é.md", "é 🙂\r\n"))
    assert run(place.list(["日本"])) == ["日本/é.md", "日本/ü 🙂.md"]
    assert run(place.read("日本/ü 🙂.md")) == ""
    assert (root / "日本" / "é.md").read_bytes() == "é 🙂\r\n".encode()


# -- through a projection ----------------------------------------------------------------------


class Recording(MemoryCollection):
    """A memory collection that counts every call, and can be told to fail its writes."""

    def __init__(self, initial: Mapping[str, str], fail_on: str | None = None) -> None:
        super().__init__(initial)
        self.calls: list[str] = []
        self.fail_on = fail_on

    async def list(self) -> list[str]:
        self.calls.append("list")
        return await super().list()

    async def read(self, key: str) -> str | None:
        self.calls.append(f"read {key}")
        return await super().read(key)

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        self.calls.append(f"write {key}")
        if key == self.fail_on:
            raise ConnectionError(f"the store refused {key}")
        await super().write(key, content, state)

    async def delete(self, key: str) -> None:
        self.calls.append(f"delete {key}")
        if key == self.fail_on:
            raise ConnectionError(f"the store refused {key}")
        await super().delete(key)


def two_mounts(
    place: MemoryPlace | HostPlace, fail_on: str | None = None
) -> tuple[Projection, Recording, Recording, ClaimRegistry]:
    art = Recording({"x.md": "1", "y.md": "1", "_meta": "m"}, fail_on)
    notes = Recording({"n.md": "1"})
    claims = ClaimRegistry()
    projection = Projection(
        [Mount("art", art, "c:art", True), Mount("notes/deep", notes, "c:notes", True)],
        place,
        claims,
    )
    return projection, art, notes, claims


def test_an_unlistable_memory_place_raises_and_nothing_reaches_any_collection() -> None:
    place = MemoryPlace()
    projection, art, notes, claims = two_mounts(place)
    run(projection.hydrate())
    owned = projection.committed()
    place.remove("art/x.md")
    run(place.write("art/y.md", "2"))
    run(place.write("art/new.md", "new"))
    place.break_listing("the sandbox went away")
    art.calls.clear()
    notes.calls.clear()

    with pytest.raises(PlaceUnreadableError, match="the sandbox went away"):
        run(projection.flush())
    assert art.calls == [] and notes.calls == [], "nothing read from or written to a collection"
    assert art.as_dict() == {"x.md": "1", "y.md": "1", "_meta": "m"}
    assert notes.as_dict() == {"n.md": "1"}
    assert projection.committed() == owned and claims.held() == []

    place.mend_listing()
    report = run(projection.flush())
    assert {o.path: o.kind for o in report.outcomes if o.kind != "unchanged"} == {
        "art/x.md": "deleted",
        "art/y.md": "written",
        "art/new.md": "created",
    }


def test_a_host_place_whose_root_was_removed_raises_and_deletes_nothing(root: Path) -> None:
    """The case the rule exists for: a removed root listed as empty would read as "the run
    deleted every file", and the flush would delete every entry it owns."""
    projection, art, notes, claims = two_mounts(HostPlace(root))
    run(projection.hydrate())
    assert (root / "notes" / "deep" / "n.md").read_text() == "1"
    shutil.rmtree(root)
    art.calls.clear()
    notes.calls.clear()

    with pytest.raises(PlaceUnreadableError):
        run(projection.flush())
    assert art.calls == [] and notes.calls == []
    assert art.as_dict() == {"x.md": "1", "y.md": "1", "_meta": "m"}
    assert notes.as_dict() == {"n.md": "1"}
    assert projection.owned_paths() == ["art/x.md", "art/y.md", "notes/deep/n.md"]
    assert claims.held() == []


@pytest.mark.parametrize("kind", ["memory", "host"])
def test_a_collection_write_that_fails_propagates_as_it_is_and_owns_nothing_new(
    kind: str, root: Path
) -> None:
    place: MemoryPlace | HostPlace = MemoryPlace() if kind == "memory" else HostPlace(root)
    projection, art, _, claims = two_mounts(place, fail_on="new.md")
    run(projection.hydrate())
    run(place.write("art/new.md", "new"))

    with pytest.raises(ConnectionError, match=r"refused new\.md") as caught:
        run(projection.flush())
    assert not isinstance(caught.value, PlaceUnreadableError)
    assert "art/new.md" not in projection.owned_paths(), "the baseline claims no failed path"
    assert art.as_dict() == {"x.md": "1", "y.md": "1", "_meta": "m"}
    assert claims.held() == [], "the failed flush's claims ended with it"

    with pytest.raises(ConnectionError):
        run(projection.put("art/new.md", "again"))
    assert "art/new.md" not in projection.owned_paths()
    assert claims.held() == []


def test_a_collection_failure_on_an_edit_keeps_the_old_base() -> None:
    place = MemoryPlace()
    projection, art, _, _ = two_mounts(place, fail_on="y.md")
    run(projection.hydrate())
    before = projection.committed()
    run(place.write("art/y.md", "2"))
    with pytest.raises(ConnectionError):
        run(projection.flush())
    assert projection.committed()["art/y.md"] == before["art/y.md"] == hash_content("1")

    place.remove("art/y.md")
    with pytest.raises(ConnectionError):
        run(projection.flush())
    assert projection.committed()["art/y.md"] == hash_content("1")
    assert art.get("y.md") == "1"


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_an_owned_file_replaced_by_a_link_or_a_pipe_is_never_read_through(
    root: Path, outside: Path, planted: str
) -> None:
    """The listing never shows a link or a pipe, so the flush sees the file gone; it must not
    follow the link into the collection, nor wait on the pipe."""
    projection, art, _, claims = two_mounts(HostPlace(root))
    run(projection.hydrate())
    (root / "art" / "x.md").unlink()
    if planted == "symlink":
        (root / "art" / "x.md").symlink_to(outside / "secret.md")
    else:
        os.mkfifo(root / "art" / "x.md")
    reports: list[Any] = []
    flusher = threading.Thread(target=lambda: reports.append(run(projection.flush())))
    flusher.start()
    flusher.join(timeout=10)
    if flusher.is_alive():
        os.close(os.open(root / "art" / "x.md", os.O_WRONLY | os.O_NONBLOCK))
        flusher.join(timeout=5)
        pytest.fail("the flush waited on a named pipe")
    assert {o.path: o.kind for o in reports[0].outcomes}["art/x.md"] == "deleted"
    assert "secret\n" not in art.as_dict().values()
    assert (outside / "secret.md").read_text() == "secret\n"
    assert claims.held() == []
