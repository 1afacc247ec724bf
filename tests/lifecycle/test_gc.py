"""`till gc`, `till retention`, `till budget` as a user meets them: what a gc keeps, what it
removes, what a thinned snapshot can still restore, and that nothing else changes."""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.helpers import manifest

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
HOUR = 3600
DAY = 86_400


def at(seconds: int) -> dict[str, str]:
    return {"TILLAGE_NOW": str(seconds)}


def store_files(home: Path) -> dict[str, int]:
    """Every file of the store but the index (a cache) with its size."""
    out = {}
    for dirpath, _dirs, files in os.walk(home):
        for name in files:
            path = Path(dirpath, name)
            rel = str(path.relative_to(home))
            if rel.startswith("index.sqlite") or rel.startswith("locks/"):
                continue
            out[rel] = path.stat().st_size
    return out


def timeline(till: Till) -> list[dict[str, Any]]:
    snaps: list[dict[str, Any]] = till.json("timeline", "-n", "1000")["snapshots"]
    return snaps


def seal_series(till: Till, folder: Path, times: list[int]) -> list[str]:
    """Seals the folder once per time (each with a changed file); returns the IDs, oldest first."""
    ids = []
    for n, t in enumerate(times):
        (folder / "src").mkdir(exist_ok=True)
        (folder / "src" / "main.py").write_text(f"print({n})\n")
        if n == 0:
            ids.append(till.json("watch", "--no-daemon", env=at(t))["head"]["id"])
        else:
            ids.append(till.json("snap", env=at(t))["snapshot"]["id"])
    return ids


def expected_survivors(times: list[int], now: int) -> set[int]:
    """The default schedule, written out independently: every snapshot of the last 24 h, then
    the newest of each UTC hour to 7 d, of each UTC day to 90 d, of each ISO week after."""
    keep = set()
    newest: dict[tuple[str, int], int] = {}
    for i, t in enumerate(times):
        for band, size in (("h", HOUR), ("d", DAY)):
            newest[(band, t // size)] = i
        newest[("w", (t // DAY + 3) // 7)] = i
    for i, t in enumerate(times):
        age = now - t
        if age <= DAY:
            keep.add(i)
        elif age <= 7 * DAY:
            if newest[("h", t // HOUR)] == i:
                keep.add(i)
        elif age <= 90 * DAY:
            if newest[("d", t // DAY)] == i:
                keep.add(i)
        elif newest[("w", (t // DAY + 3) // 7)] == i:
            keep.add(i)
    keep.add(len(times) - 1)  # the head
    return keep


def test_gc_without_yes_changes_nothing_and_a_dry_run_says_what_it_would_do(
    till: Till, folder: Path
) -> None:
    times = [T0 + i * 20 * 60 for i in range(12)]  # 4 hours, every 20 min
    seal_series(till, folder, times)
    before = store_files(till.home)
    now = at(T0 + 3 * DAY)  # the hourly band: the newest of each of the 4 hours stays

    refused = till("--json", "gc", env=now)
    assert refused.code == 1
    assert refused.error["name"] == "confirmation_required"
    dry = till.json("gc", "--dry-run", env=now)
    assert dry["dry_run"] is True
    assert dry["snapshots_removed"] == 12 - 4
    assert 12 - len(expected_survivors(times, T0 + 3 * DAY)) == 8
    assert dry["bytes_reclaimed"] > 0
    assert store_files(till.home) == before
    assert len(timeline(till)) == 12

    both = till("--json", "gc", "--dry-run", "--yes", env=now)
    assert both.code == 1
    assert both.error["name"] == "invalid_argument"


def test_gc_applies_the_schedule_and_removed_snapshots_answer_not_found(
    till: Till, folder: Path
) -> None:
    rng = random.Random(7)
    times = sorted({T0 + rng.randrange(0, 12 * DAY) for _ in range(30)})
    ids = seal_series(till, folder, times)
    now = times[-1] + HOUR
    doc = till.json("gc", "--yes", env=at(now))

    kept = {s["id"] for s in timeline(till)}
    want = {ids[i] for i in expected_survivors(times, now)}
    assert kept == want
    assert doc["snapshots_removed"] == len(ids) - len(want)
    assert set(doc["removed"]) == set(ids) - want
    gone = next(iter(set(ids) - want))
    run = till("--json", "show", gone)
    assert run.code == 1
    assert run.error["name"] == "snapshot.not_found"
    # Every snapshot that is left restores byte-exact.
    for snap in timeline(till)[:3]:
        till.json("rewind", snap["id"], "--yes")
        assert (folder / "src" / "main.py").read_text() == f"print({ids.index(snap['id'])})\n"


def test_the_head_pins_and_recent_undo_points_are_never_removed(till: Till, folder: Path) -> None:
    ids = seal_series(till, folder, [T0 + i * 10 * 60 for i in range(6)])
    till.json("pin", ids[1])
    # A rewind seals an undo point (pre_rewind) at the pinned time.
    rewound = till.json("rewind", ids[2], "--yes", env=at(T0 + 30 * DAY))
    undo = rewound["undo"]
    doc = till.json("gc", "--yes", env=at(T0 + 30 * DAY + HOUR))
    kept = {s["id"] for s in timeline(till)}
    assert ids[1] in kept  # pinned
    assert undo in kept  # the undo point (also the head)
    assert doc["snapshots_removed"] >= 1
    later = till.json("gc", "--yes", env=at(T0 + 400 * DAY))
    assert ids[1] in {s["id"] for s in timeline(till)}
    assert later["snapshots_thinned"] == 0


def test_a_second_gc_changes_nothing(till: Till, folder: Path) -> None:
    seal_series(till, folder, [T0 + i * HOUR // 3 for i in range(15)])
    now = at(T0 + 20 * DAY)
    till.json("gc", "--yes", env=now)
    files = store_files(till.home)
    log = (till.home / "log" / "publication.log").read_bytes()
    again = till.json("gc", "--yes", env=now)
    assert (again["snapshots_removed"], again["snapshots_thinned"]) == (0, 0)
    assert (again["objects_removed"], again["packs_rewritten"]) == (0, 0)
    assert store_files(till.home) == files
    assert (till.home / "log" / "publication.log").read_bytes() == log


def test_forget_purge_is_reclaimed_by_the_next_gc(till: Till, folder: Path) -> None:
    (folder / "data.bin").write_bytes(random.Random(1).randbytes(3 << 20))
    till.json("watch", "--no-daemon")
    before = till.json("gc", "--dry-run")["store_bytes_before"]
    assert before > 3 << 20
    till.json("forget", "--purge", "--yes")
    doc = till.json("gc", "--yes")
    assert doc["bytes_reclaimed"] >= (3 << 20) - (64 << 10)  # the log grew by two lines
    assert doc["store_bytes_after"] < 1 << 20
    assert not any(p.stat().st_size > 1 << 20 for p in (till.home / "packs").iterdir())


def _trust_the_rewinds_rows(till: Till, folder: Path) -> None:
    """The path index as a rewind leaves it when its last write ended beyond the racy window
    before it settled (a large folder on a real disk, where fsync takes its time): every row
    trusted with the file's stat facts, none marked for reading again (INV-8)."""
    from tillage.store.store import Store
    from tillage.workspace import pathindex

    workspace = till.json("status")["id"]
    store = Store.open(till.home)
    try:
        index = pathindex.load(store, workspace)
        for path, row in index.files.items():
            if row[1] == -1 and os.path.lexists(folder / path):
                facts = pathindex.stat_facts(os.lstat(folder / path), row[6])
                index.files[path] = (*facts, *row[pathindex.FACTS :])
        pathindex.save(store, workspace, index)
    finally:
        store.close()


def test_a_seal_after_a_gc_never_names_bytes_the_gc_swept_from_a_rewinds_target(
    till: Till, folder: Path
) -> None:
    # Data loss (issue 26, item 1): a rewind leaves its target's content in the path index; a
    # gc that thins the target (its dependency bytes are old) swept that content, and the next
    # seal reused the rows unread: a head graded exact that named swept bytes. A gc keeps what
    # a path index names, so the head reads back whole.
    (folder / "node_modules" / "dep").mkdir(parents=True)
    dep = folder / "node_modules" / "dep" / "index.js"
    dep.write_bytes(random.Random(5).randbytes(100_000))
    old_bytes = dep.read_bytes()
    old = till.json("watch", "--no-daemon", env=at(T0))["head"]["id"]
    dep.write_bytes(random.Random(6).randbytes(100_000))
    till.json("snap", env=at(T0 + HOUR))
    (folder / "a.js").write_text("2\n")
    till.json("snap", env=at(T0 + 5 * DAY))
    till.json("rewind", old, "--yes", env=at(T0 + 5 * DAY + 60))
    _trust_the_rewinds_rows(till, folder)
    till.json("gc", "--yes", env=at(T0 + 5 * DAY + 120))
    (folder / "b.js").write_text("x\n")
    head = till.json("snap", env=at(T0 + 5 * DAY + 180))["snapshot"]
    assert head["grade"] == "exact"
    report = till.json("verify")
    assert report["ok"] is True, report["problems"]
    doc = till.json("cat", head["id"], "node_modules/dep/index.js")
    assert base64.b64decode(doc["content_base64"]) == old_bytes
    assert till.json("rewind", head["id"], "--yes")["applied"] is not None


def _thinned_workspace(till: Till, folder: Path) -> tuple[str, str, bytes]:
    """An old snapshot with dependency bytes no newer snapshot holds, thinned by a gc."""
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("v1\n")
    (folder / "node_modules" / "lib").mkdir(parents=True)
    old_dep = random.Random(2).randbytes(200_000)
    (folder / "node_modules" / "lib" / "index.js").write_bytes(old_dep)
    (folder / ".env").write_text("SECRET=1\n")
    old = till.json("watch", "--no-daemon", env=at(T0))["head"]["id"]
    (folder / "src" / "app.py").write_text("v2\n")
    (folder / "node_modules" / "lib" / "index.js").write_bytes(random.Random(3).randbytes(1000))
    new = till.json("snap", env=at(T0 + 4 * DAY))["snapshot"]["id"]
    doc = till.json("gc", "--yes", env=at(T0 + 4 * DAY + HOUR))
    assert old in doc["thinned"]
    return old, new, old_dep


def test_a_rewind_to_a_thinned_snapshot_restores_what_it_has_and_lists_what_it_lost(
    till: Till, folder: Path
) -> None:
    old, _new, _old_dep = _thinned_workspace(till, folder)
    snaps = {s["id"]: s for s in timeline(till)}
    assert snaps[old]["grade"] == "partial"
    live_dep = (folder / "node_modules" / "lib" / "index.js").read_bytes()

    doc = till.json("rewind", old, "--yes")
    assert doc["applied"] is True
    assert doc["missing"] == [
        {
            "path": "node_modules/lib/index.js",
            "class": "dependency",
            "reason": doc["missing"][0]["reason"],
        }
    ]
    assert "dependency" in doc["missing"][0]["reason"]
    assert (folder / "src" / "app.py").read_text() == "v1\n"
    assert (folder / ".env").read_text() == "SECRET=1\n"
    # The live copy of the missing path is left as it was.
    assert (folder / "node_modules" / "lib" / "index.js").read_bytes() == live_dep
    assert "node_modules/lib/index.js" not in {c["path"] for c in doc["changes"]}

    shown = till.json("show", old)
    assert [m["path"] for m in shown["missing"]] == ["node_modules/lib/index.js"]
    fidelity = till.json("status", "--fidelity")
    assert [t["snapshot"] for t in fidelity["thinned"]] == [old]
    assert fidelity["thinned"][0]["classes"] == ["dependency"]


def test_a_thinned_snapshot_cannot_be_pinned_and_its_lost_file_cannot_be_read(
    till: Till, folder: Path
) -> None:
    old, new, _old_dep = _thinned_workspace(till, folder)
    run = till("--json", "pin", old)
    assert run.code == 1
    assert run.error["name"] == "lifecycle.snapshot_partial"
    assert not {s["id"]: s for s in timeline(till)}[old]["pinned"]
    cat = till("--json", "cat", old, "node_modules/lib/index.js")
    assert cat.code == 1
    assert cat.error["name"] == "lifecycle.bytes_dropped"
    assert till("cat", old, "src/app.py").stdout == "v1\n"
    assert till.json("pin", new)["snapshot"]["pinned"] is True


def test_a_dependency_shared_with_the_head_is_not_lost(till: Till, folder: Path) -> None:
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "same.js").write_text("unchanged\n")
    (folder / "a.txt").write_text("1")
    old = till.json("watch", "--no-daemon", env=at(T0))["head"]["id"]
    (folder / "a.txt").write_text("2")
    till.json("snap", env=at(T0 + 5 * DAY))
    doc = till.json("gc", "--yes", env=at(T0 + 5 * DAY + HOUR))
    assert old not in doc["thinned"]
    assert {s["id"]: s for s in timeline(till)}[old]["grade"] == "exact"
    assert till("cat", old, "node_modules/same.js").stdout == "unchanged\n"


def test_a_tillagepolicy_class_line_gives_a_path_a_byte_window(till: Till, folder: Path) -> None:
    (folder / ".tillagepolicy").write_text("@class dependency third_party/**\n")
    (folder / "third_party").mkdir()
    (folder / "third_party" / "blob.bin").write_bytes(b"x" * 5000)
    old = till.json("watch", "--no-daemon", env=at(T0))["head"]["id"]
    (folder / "third_party" / "blob.bin").write_bytes(b"y" * 5000)
    till.json("snap", env=at(T0 + 4 * DAY))
    till.json("gc", "--yes", env=at(T0 + 4 * DAY + HOUR))
    shown = till.json("show", old)
    assert [(m["path"], m["class"]) for m in shown["missing"]] == [
        ("third_party/blob.bin", "dependency")
    ]


def test_retention_shows_sets_and_refuses_what_is_no_duration(till: Till, folder: Path) -> None:
    assert till.json("retention")["retention"] == {
        "keep_all": "24h",
        "hourly": "7d",
        "daily": "90d",
        "weekly": "forever",
    }
    doc = till.json("retention", "--hourly", "2d", "--weekly", "52w")
    assert doc["retention"] == {
        "keep_all": "24h",
        "hourly": "2d",
        "daily": "90d",
        "weekly": "364d",
    }
    bad = till("--json", "retention", "--daily", "soon")
    assert bad.code == 1
    assert bad.error["name"] == "invalid_argument"
    (till.home / "index.sqlite").unlink()  # a fact in the log, not a cache entry
    assert till.json("retention")["retention"]["hourly"] == "2d"


def test_a_shorter_schedule_removes_more(till: Till, folder: Path) -> None:
    ids = seal_series(till, folder, [T0 + i * HOUR for i in range(10)])
    till.json("retention", "--keep-all", "2h", "--hourly", "0h", "--daily", "0h", "--weekly", "0h")
    till.json("gc", "--yes", env=at(T0 + 9 * HOUR))
    assert {s["id"] for s in timeline(till)} == set(ids[-3:])


def test_budget_shows_sets_enforces_and_never_takes_the_head(till: Till, folder: Path) -> None:
    data = random.Random(5)
    for n in range(6):
        (folder / "blob.bin").write_bytes(data.randbytes(400_000))
        if n == 0:
            till.json("watch", "--no-daemon", env=at(T0))
        else:
            till.json("snap", env=at(T0 + n * DAY))
    shown = till.json("budget")
    assert shown["max_bytes"] == 20 << 30 and shown["reserve_free_bytes"] == 512 << 20
    assert shown["over_budget"] is False and shown["next"] is None
    assert shown["store_bytes"] > 2_000_000

    doc = till.json("budget", "--max", "1m", env=at(T0 + 6 * DAY))
    assert doc["max_bytes"] == 1 << 20 and doc["over_budget"] is True  # set, nothing removed
    enforced = till.json("gc", "--yes", env=at(T0 + 6 * DAY))
    assert enforced["snapshots_removed"] >= 3
    doc = till.json("budget")
    assert doc["over_budget"] is False
    assert doc["store_bytes"] <= 1 << 20
    head = timeline(till)[0]
    latest = (folder / "blob.bin").read_bytes()
    (folder / "blob.bin").write_bytes(b"scribbled")
    till.json("rewind", head["id"], "--yes")  # the head restores whole
    assert (folder / "blob.bin").read_bytes() == latest

    till.json("budget", "--max", "10k")
    till.json("gc", "--yes")
    tiny = till.json("budget")
    assert tiny["over_budget"] is True
    assert any(h["why"] == "head" for h in tiny["held_by"])
    assert len(timeline(till)) >= 1
    status = till.json("status")
    assert status["budget"]["over_budget"] is True
    bad = till("--json", "budget", "--max", "lots")
    assert bad.code == 1 and bad.error["name"] == "invalid_argument"


def test_a_seal_over_budget_runs_gc_by_itself(till: Till, folder: Path) -> None:
    data = random.Random(6)
    (folder / "blob.bin").write_bytes(data.randbytes(300_000))
    till.json("watch", "--no-daemon", env=at(T0))
    till.json("budget", "--max", "1m")
    for n in range(1, 8):
        (folder / "blob.bin").write_bytes(data.randbytes(300_000))
        till.json("snap", env=at(T0 + n * DAY))
    assert till.json("budget")["store_bytes"] <= 1 << 20
    assert len(timeline(till)) < 8
    assert manifest(folder)  # the folder itself is untouched by any of it


def test_gc_on_a_machine_with_no_store_creates_none(till: Till, folder: Path) -> None:
    doc = till.json("gc", "--yes")
    assert doc["snapshots_removed"] == 0
    assert till.json("retention")["retention"]["keep_all"] == "24h"
    assert till.json("budget")["store_bytes"] == 0
    assert not till.home.exists()


def _gc_lines(till: Till) -> int:
    log = (till.home / "log" / "publication.log").read_text()
    return sum(1 for line in log.splitlines() if '"kind":"gc"' in line)


def test_a_store_that_cannot_get_under_is_not_collected_again_at_every_seal(
    till: Till, folder: Path
) -> None:
    (folder / "blob.bin").write_bytes(random.Random(8).randbytes(200_000))
    till.json("watch", "--no-daemon", env=at(T0))
    (folder / "blob.bin").write_bytes(random.Random(9).randbytes(200_000))
    till.json("snap", env=at(T0 + 2 * DAY))
    till.json("budget", "--max", "10k", env=at(T0 + 2 * DAY))
    till.json("gc", "--yes", env=at(T0 + 2 * DAY))
    held = till.json("budget", env=at(T0 + 2 * DAY))
    assert held["over_budget"] is True
    assert [h["why"] for h in held["held_by"]] == ["head"]
    lines = _gc_lines(till)
    for n in range(3):  # small seals: the store hardly grows, and nothing more could go
        (folder / "note.txt").write_text(str(n))
        till.json("snap", env=at(T0 + 2 * DAY + n + 1))
    assert _gc_lines(till) == lines
    assert till.json("status")["budget"]["over_budget"] is True


def test_a_budget_never_takes_a_recent_undo_point(till: Till, folder: Path) -> None:
    rng = random.Random(12)
    (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
    first = till.json("watch", "--no-daemon", env=at(T0))["head"]["id"]
    (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
    till.json("snap", env=at(T0 + HOUR))
    undo = till.json("rewind", first, "--yes", env=at(T0 + 2 * HOUR))["undo"]
    (folder / "blob.bin").write_bytes(rng.randbytes(300_000))
    till.json("snap", env=at(T0 + 3 * HOUR))
    till.json("budget", "--max", "10k", env=at(T0 + 3 * HOUR))
    till.json("gc", "--yes", env=at(T0 + 3 * HOUR))
    assert undo in {s["id"] for s in timeline(till)}  # younger than the keep-all window


def test_a_fork_of_a_thinned_snapshot_is_refused_naming_what_it_lacks(
    till: Till, folder: Path
) -> None:
    """(issue 21, item 13) Not `store.damaged` (verify says the store is fine): the snapshot
    is partial, and a fork without its dropped files would merge back as their deletion."""
    old, _new, _old_dep = _thinned_workspace(till, folder)
    run = till("--json", "fork", "old", "--at", old)
    assert run.code != 0
    error = json.loads(run.stdout)["error"]
    assert error["name"] == "fork.snapshot_partial"
    assert error["details"]["missing"] == [
        {"path": "node_modules/lib/index.js", "class": "dependency"}
    ]
    assert not (folder.parent / f"{folder.name}.forks" / "old").exists()
    assert till.json("forks")["forks"] == []
    assert till.json("verify")["ok"] is True
