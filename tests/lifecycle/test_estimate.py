"""`till estimate` through the real process: what a cold seal would capture and cost, with
content IDs exactly the seal's, and nothing written anywhere (no store, no `.tillage/`)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till
from tests.helpers import make_project
from tillage.core.classes import CLASSES

FIELDS = {"files", "dirs", "bytes", "excluded", "classes", "new_bytes", "dedup_bytes", "seconds"}
MIB = 1 << 20


def listing(root: Path) -> dict[str, object]:
    """Every path below `root`, `.tillage/` included, with its kind, bytes and mtime."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            out[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, data)
    return out


def check_shape(doc: dict[str, object]) -> None:
    assert set(doc) == FIELDS
    classes = doc["classes"]
    assert isinstance(classes, dict)
    assert set(classes) == set(CLASSES)
    assert sum(classes.values()) == doc["bytes"]
    assert doc["new_bytes"] + doc["dedup_bytes"] == doc["bytes"]  # type: ignore[operator]
    assert isinstance(doc["seconds"], float) and doc["seconds"] >= 0


def test_an_unattached_folder_is_estimated_and_nothing_is_written(till: Till, folder: Path) -> None:
    make_project(folder)
    (folder / ".tillagepolicy").write_text("cache/\n*.tmp\n@class scratch notes/**\n")
    (folder / "cache").mkdir()
    (folder / "cache" / "big.bin").write_bytes(os.urandom(50_000))
    (folder / "x.tmp").write_text("scratch")
    (folder / "notes").mkdir()
    (folder / "notes" / "n.txt").write_text("note " * 100)
    (folder / "node_modules" / "left-pad").mkdir(parents=True)
    (folder / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1;\n")
    before = listing(folder)
    assert not till.home.exists()

    doc = till.json("estimate")

    check_shape(doc)
    assert listing(folder) == before
    assert not (folder / ".tillage").exists()
    assert not till.home.exists()
    assert doc["excluded"] == ["cache", "x.tmp"]
    # no store: all is new but what repeats inside the folder (a few bytes of `.git`)
    assert 0 <= doc["dedup_bytes"] < doc["bytes"] // 100
    assert doc["classes"]["database"] == (folder / "dev.db").stat().st_size
    assert doc["classes"]["scratch"] == 500  # the @class line
    assert doc["classes"]["dependency"] == 20
    assert doc["classes"]["vcs"] > 0 and doc["classes"]["build"] == 3000
    assert doc["classes"]["config"] > 0 and doc["classes"]["source"] > 0

    # what a real seal then captures is what the estimate said
    head = till.json("watch", "--no-daemon")["head"]
    assert (head["files"], head["bytes"]) == (doc["files"], doc["bytes"])


def test_after_a_seal_the_same_folder_is_all_dedup_and_a_new_file_is_new(
    till: Till, folder: Path
) -> None:
    make_project(folder)
    (folder / "data.bin").write_bytes(os.urandom(3 * MIB))  # several content-defined chunks
    till.json("watch", "--no-daemon")
    store_before = listing(till.home)
    folder_before = listing(folder)

    doc = till.json("estimate")
    check_shape(doc)
    assert doc["new_bytes"] == 0
    assert doc["dedup_bytes"] == doc["bytes"]
    assert listing(till.home) == store_before
    assert listing(folder) == folder_before

    (folder / "fresh.bin").write_bytes(os.urandom(MIB))
    doc = till.json("estimate")
    check_shape(doc)
    assert doc["new_bytes"] == MIB
    assert listing(till.home) == store_before


def test_a_content_repeated_in_the_folder_counts_once_as_new(till: Till, folder: Path) -> None:
    blob = os.urandom(300_000)
    (folder / "a.bin").write_bytes(blob)
    (folder / "b.bin").write_bytes(blob)
    (folder / "small.txt").write_text("hello")
    doc = till.json("estimate")
    check_shape(doc)
    assert doc["bytes"] == 600_005
    assert doc["new_bytes"] == 300_005
    assert doc["dedup_bytes"] == 300_000
    assert (doc["files"], doc["dirs"]) == (3, 0)


def test_an_estimate_beside_a_running_watcher_reads_its_store(till: Till, folder: Path) -> None:
    (folder / "a.bin").write_bytes(os.urandom(200_000))
    assert till.json("watch")["watching"] is True
    try:
        doc = till.json("estimate")
        check_shape(doc)
        assert doc["new_bytes"] == 0
    finally:
        till.json("watch", "--stop")


def test_an_empty_folder_is_estimated_as_nothing(till: Till, folder: Path) -> None:
    doc = till.json("estimate")
    check_shape(doc)
    assert (doc["files"], doc["dirs"], doc["bytes"], doc["new_bytes"]) == (0, 0, 0, 0)
    assert doc["seconds"] < 5


def test_a_folder_that_does_not_exist_is_a_structured_error(till: Till, folder: Path) -> None:
    run = till("--json", "--repo", str(folder / "missing"), "estimate")
    assert run.code == 1
    assert run.error["name"] == "workspace.folder_missing"
    assert run.error["code"] == -32066
    assert not till.home.exists()
    (folder / "file").write_text("x")
    run = till("--json", "--repo", str(folder / "file"), "estimate")
    assert run.code == 1 and run.error["name"] == "workspace.folder_missing"


def test_a_bad_class_line_is_not_fatal_and_the_good_ones_apply(till: Till, folder: Path) -> None:
    (folder / ".tillagepolicy").write_text("@class bogus a/**\n@class database data/**\n")
    (folder / "data").mkdir()
    (folder / "data" / "rows.bin").write_bytes(b"r" * 1000)
    doc = till.json("estimate")
    check_shape(doc)
    assert doc["classes"]["database"] == 1000
    assert doc["excluded"] == []


def test_people_get_a_short_summary_in_binary_units(till: Till, folder: Path) -> None:
    (folder / "a.bin").write_bytes(os.urandom(2 * MIB))
    (folder / ".tillagepolicy").write_text("cache/\n")
    (folder / "cache").mkdir()
    run = till("estimate")
    assert run.code == 0, run.stderr
    text = run.stdout
    assert "2 files in 0 folders: 2.0 MiB." in text  # `cache/` is excluded
    assert "New to the store: 2.0 MiB" in text
    assert "Predicted seal time on this machine: about" in text
    assert "source" in text and "config" in text
    assert "Excluded by .tillagepolicy: cache." in text
    assert not till.home.exists()
