"""Every first-wave command through the real process, with its fields and its failure cases."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest
from tests.conftest import Till
from tests.helpers import git, make_project, manifest

SNAPSHOT_FIELDS = {
    "id",
    "short",
    "sealed_at",
    "trigger",
    "label",
    "grade",
    "pinned",
    "parent",
    "files",
    "bytes",
    "agent",
    "turn",
    "session",
}


@pytest.fixture
def attached(till: Till, folder: Path) -> dict[str, object]:
    make_project(folder)
    head: dict[str, object] = till.json("watch", "--no-daemon")["head"]
    return head


def test_watch_attaches_and_answers_the_contract_fields(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    doc = till.json("watch", "--no-daemon")
    assert doc["workspace"] == str(folder.resolve())
    assert doc["watching"] is False
    assert set(doc["head"]) >= SNAPSHOT_FIELDS
    assert len(doc["head"]["id"]) == 64 and doc["head"]["short"] == doc["head"]["id"][:12]
    assert doc["head"]["sealed_at"].endswith("Z")


def test_the_pointer_does_not_show_in_git_status(till: Till, folder: Path) -> None:
    make_project(folder)
    till.json("watch", "--no-daemon")
    assert (folder / ".tillage").is_dir()
    assert git(folder, "status", "--porcelain") == ""


def test_status_on_a_folder_that_is_not_attached_says_to_run_watch(till: Till) -> None:
    run = till("--json", "status")
    assert run.code == 1
    assert run.error["code"] == -32060
    assert "till watch" in run.error["next"]


def test_every_workspace_command_on_an_unattached_folder_answers_not_attached(
    till: Till,
) -> None:
    for args in (
        ["snap"],
        ["timeline"],
        ["show", "abcdef"],
        ["diff", "abcdef"],
        ["rewind", "abcdef", "--yes"],
        ["pin", "abcdef"],
    ):
        run = till("--json", *args)
        assert run.code == 1, args
        assert run.error["name"] == "workspace.not_attached", args


def test_attaching_the_home_directory_or_its_parent_is_refused(till: Till, user_home: Path) -> None:
    for target in (user_home, user_home.parent):
        run = till("--json", "--repo", str(target), "watch", "--no-daemon")
        assert run.code == 1
        assert run.error["name"] == "workspace.refused_root"
        assert run.error["next"]
    run = till("--json", "--repo", "/", "watch", "--no-daemon")
    assert run.error["name"] == "workspace.refused_root"


def test_a_deleted_pointer_is_recreated_from_the_catalogue(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    git(folder, "clean", "-fdxq")
    assert not (folder / ".tillage").exists()
    doc = till.json("status")
    assert doc["head"]["id"] == attached["id"]
    assert (folder / ".tillage" / "workspace.json").is_file()


def test_commands_work_from_a_subfolder(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    doc = till.json("status", cwd=folder / "src" / "pkg")
    assert doc["workspace"] == str(folder.resolve())


def test_snap_labels_and_timeline_lists_newest_first(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / "new.txt").write_text("new")
    snap = till.json("snap", "-m", "after new.txt")["snapshot"]
    assert snap["label"] == "after new.txt" and snap["trigger"] == "manual"
    assert snap["parent"] == attached["id"]
    listed = till.json("timeline")["snapshots"]
    assert [s["id"] for s in listed] == [snap["id"], attached["id"]]
    assert [s["id"] for s in till.json("timeline", "-n", "1")["snapshots"]] == [snap["id"]]
    manual = till.json("timeline", "--trigger", "manual")["snapshots"]
    assert [s["id"] for s in manual] == [snap["id"]]
    bad = till("--json", "timeline", "--trigger", "nonsense")
    assert bad.code == 1 and bad.error["code"] == -32066


def test_show_counts_changes_from_the_parent(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / "new.txt").write_text("new")
    (folder / "README.md").write_text("changed\n")
    snap = till.json("snap")["snapshot"]
    doc = till.json("show", snap["id"][:10])
    assert doc["snapshot"]["id"] == snap["id"]
    assert doc["changes_from_parent"] == 2


def test_diff_against_the_live_folder_and_between_snapshots(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / "README.md").write_text("changed\n")
    (folder / "new.txt").write_text("n")
    (folder / "src" / "pkg" / "util.py").unlink()
    (folder / "run.sh").chmod(0o644)
    live = till.json("diff", str(attached["id"]))["changes"]
    kinds = {c["path"]: c["kind"] for c in live}
    assert kinds == {
        "README.md": "modified",
        "new.txt": "added",
        "src/pkg/util.py": "deleted",
        "run.sh": "mode_changed",
    }
    readme = next(c for c in live if c["path"] == "README.md")
    assert readme["old_size"] == len("# demo\n") and readme["new_size"] == len("changed\n")
    snap = till.json("snap")["snapshot"]
    between = till.json("diff", str(attached["id"]), "--to", snap["id"])["changes"]
    assert {c["path"]: c["kind"] for c in between} == kinds


def test_cat_prints_the_bytes_as_they_were(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / ".env").write_text("API_KEY=rotated\n")
    doc = till.json("cat", str(attached["id"]), ".env")
    assert base64.b64decode(doc["content_base64"]) == b"API_KEY=secret\n"
    assert doc["size"] == len(b"API_KEY=secret\n")
    raw = till("cat", str(attached["id"]), ".env")
    assert raw.code == 0 and raw.stdout == "API_KEY=secret\n"
    missing = till("--json", "cat", str(attached["id"]), "no/such/file")
    assert missing.code == 1 and missing.error["code"] == -32061


def test_unknown_and_malformed_ids_are_public_errors(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    unknown = till("--json", "show", "ffffffffffff")
    assert unknown.code == 1 and unknown.error["code"] == -32061
    short = till("--json", "show", "abc")
    assert short.code == 1 and short.error["code"] == -32066
    not_hex = till("--json", "show", "zzzzzzzz")
    assert not_hex.code == 1 and not_hex.error["code"] == -32066


def test_pin_and_unpin_are_recorded(till: Till, attached: dict[str, object]) -> None:
    pinned = till.json("pin", str(attached["id"])[:8])["snapshot"]
    assert pinned["pinned"] is True
    assert till.json("timeline")["snapshots"][0]["pinned"] is True
    assert till.json("unpin", str(attached["id"]))["snapshot"]["pinned"] is False


def test_rewind_without_yes_in_machine_mode_changes_nothing(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / "README.md").write_text("changed\n")
    before = manifest(folder)
    for args in (["--json", "rewind", str(attached["id"])], ["rewind", str(attached["id"])]):
        run = till(*args)  # stdin is not a terminal: machine mode either way
        assert run.code == 1
        assert "confirmation_required" in (run.stdout + run.stderr)
    assert manifest(folder) == before
    assert len(till.json("timeline")["snapshots"]) == 1


def test_rewind_by_path_touches_only_that_path(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / ".env").unlink()
    (folder / "README.md").write_text("keep my edit\n")
    doc = till.json("rewind", str(attached["id"]), "--paths", ".env", "--yes")
    assert [c["path"] for c in doc["changes"]] == [".env"]
    assert (folder / ".env").read_text() == "API_KEY=secret\n"
    assert (folder / "README.md").read_text() == "keep my edit\n"


def test_rewind_by_directory_restores_everything_below_it(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    before = manifest(folder)
    shutil.rmtree(folder / "src")
    till.json("rewind", str(attached["id"]), "--paths", "src", "--yes")
    after = manifest(folder)
    assert {k: v for k, v in after.items() if k.startswith("src")} == {
        k: v for k, v in before.items() if k.startswith("src")
    }


@pytest.mark.parametrize("bad", ["../outside", "/etc/passwd", "a/../../b"])
def test_rewind_refuses_paths_that_escape_the_workspace(
    till: Till, folder: Path, attached: dict[str, object], bad: str
) -> None:
    before = manifest(folder)
    run = till("--json", "rewind", str(attached["id"]), "--paths", bad, "--yes")
    assert run.code == 1 and run.error["code"] == -32066
    assert manifest(folder) == before


def test_rewind_of_a_path_not_in_the_snapshot_is_not_found(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    run = till("--json", "rewind", str(attached["id"]), "--paths", "nope.txt", "--yes")
    assert run.code == 1 and run.error["code"] == -32061


def test_a_policy_excludes_a_subtree_from_capture_and_from_rewind(till: Till, folder: Path) -> None:
    (folder / ".tillagepolicy").write_text("cache/\n")
    (folder / "cache").mkdir()
    (folder / "cache" / "big.bin").write_text("v1")
    (folder / "keep.txt").write_text("v1")
    head = till.json("watch", "--no-daemon")["head"]
    (folder / "cache" / "big.bin").write_text("v2")
    (folder / "keep.txt").write_text("v2")
    till.json("rewind", head["id"], "--yes")
    assert (folder / "keep.txt").read_text() == "v1"
    assert (folder / "cache" / "big.bin").read_text() == "v2"
    assert till.json("cat", head["id"], ".tillagepolicy")["size"] > 0


def test_status_fidelity_lists_what_is_not_exact(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    os.link(folder / "a.txt", folder / "b.txt")
    os.mkfifo(folder / "pipe")
    head = till.json("watch", "--no-daemon")["head"]
    assert head["grade"] == "partial"
    fidelity = till.json("status", "--fidelity")["fidelity"]
    paths = {f["path"] for f in fidelity}
    assert "pipe" in paths
    assert not {"a.txt", "b.txt"} & paths  # hard links are captured as links (issue 6)
    assert all(f["grade"] == "partial" and f["reason"] for f in fidelity)
    assert till.json("status")["fidelity"] is None


def test_a_delta_seal_reads_only_what_changed(till: Till, folder: Path) -> None:
    for i in range(30):
        (folder / f"f{i}.txt").write_text(f"file {i}\n")
    old = os.stat(folder / "f0.txt").st_mtime_ns - 10_000_000_000
    for i in range(30):
        os.utime(folder / f"f{i}.txt", ns=(old, old))  # outside the racy window
    till.json("watch", "--no-daemon")
    (folder / "f1.txt").write_text("changed\n")
    first = till.json("snap")["snapshot"]
    assert first["files"] == 30
    # Same size and mtime, new content: only the ctime tells; the seal must still see it.
    target = folder / "f2.txt"
    st = target.stat()
    target.write_text("file X\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    snap = till.json("snap")["snapshot"]
    doc = till.json("cat", snap["id"], "f2.txt")
    assert base64.b64decode(doc["content_base64"]) == b"file X\n"


def test_verify_answers_ok_on_a_healthy_store(till: Till, attached: dict[str, object]) -> None:
    doc = till.json("verify")
    assert doc["ok"] is True and doc["objects"] > 0 and doc["problems"] == []


def test_forget_detaches_and_purge_needs_yes(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    refused = till("--json", "forget", "--purge")
    assert refused.code == 1 and refused.error["code"] == -32064
    assert till.json("status")["attached"] is True
    doc = till.json("forget", "--purge", "--yes")
    assert doc["purged"] is True
    assert doc["snapshots"] == 1 and "(1 snapshot)" in doc["note"], doc["note"]
    assert not (folder / ".tillage").exists()
    assert till("--json", "status").error["code"] == -32060


def test_a_file_edited_right_after_a_rewind_is_sealed_with_its_new_bytes(
    till: Till, folder: Path, attached: dict[str, object]
) -> None:
    (folder / "README.md").write_text("# edit\n")
    till.json("rewind", str(attached["id"]), "--yes")
    target = folder / "README.md"
    st = target.stat()
    target.write_text("# DEMO\n")  # same size as the rewound "# demo\n"
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    snap = till.json("snap")["snapshot"]
    doc = till.json("cat", snap["id"], "README.md")
    assert base64.b64decode(doc["content_base64"]) == b"# DEMO\n"


def test_user_xattrs_symlinks_modes_and_mtimes_come_back_exactly(till: Till, folder: Path) -> None:
    target = folder / "tagged.txt"
    target.write_text("tagged\n")
    try:
        os.setxattr(target, "user.origin", b"agent-7")
    except OSError:
        pytest.skip("this file system keeps no user xattrs")
    (folder / "tool").write_text("#!/bin/sh\n")
    (folder / "tool").chmod(0o750)
    (folder / "dangling").symlink_to("nowhere/at/all")
    os.utime(target, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    before = manifest(folder)
    head = till.json("watch", "--no-daemon")["head"]
    os.removexattr(target, "user.origin")
    target.write_text("changed\n")
    (folder / "tool").chmod(0o644)
    (folder / "dangling").unlink()
    till.json("rewind", head["id"], "--yes")
    assert manifest(folder) == before
    assert os.getxattr(target, "user.origin") == b"agent-7"
    assert target.stat().st_mtime_ns == 1_600_000_000_123_456_789


def test_a_folder_that_holds_the_store_is_refused_and_nothing_is_written(
    tmp_path: Path, user_home: Path, folder: Path
) -> None:
    # Changed by issue 6: a rewind there would cut other workspaces' timelines, so a folder
    # holding the store is refused like `/` and $HOME (it used to be attached, store skipped).
    inside = Till(folder / ".store", user_home, folder)
    (folder / "a.txt").write_text("v1\n")
    run = inside("--json", "watch", "--no-daemon")
    assert run.code == 1
    assert run.error["name"] == "workspace.refused_root"
    assert "store" in run.error["message"]
    assert not (folder / ".tillage").exists()


def test_a_name_that_is_not_utf8_round_trips_and_the_json_stays_valid(
    till: Till, folder: Path
) -> None:
    (folder / os.fsdecode(b"\xff-raw.txt")).write_bytes(b"raw name\n")
    head = till.json("watch", "--no-daemon")["head"]
    (folder / os.fsdecode(b"\xff-raw.txt")).unlink()
    run = till("--json", "diff", head["id"])
    run.stdout.encode("utf-8")  # valid UTF-8 on the wire
    (change,) = run.doc["changes"]
    assert os.fsencode(change["path"]) == b"\xff-raw.txt"
    till.json("rewind", head["id"], "--yes")
    assert (folder / os.fsdecode(b"\xff-raw.txt")).read_bytes() == b"raw name\n"


def test_a_folder_that_does_not_exist_is_said_to_be_missing(till: Till, folder: Path) -> None:
    # Changed by issue 6: it used to answer not_attached, which sent people to `till watch`.
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    run = till("--json", "--repo", str(folder / "no-such-folder"), "status")
    assert run.code == 1
    assert run.error["name"] == "workspace.folder_missing"
    assert "does not exist" in run.error["message"]
