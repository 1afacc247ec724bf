"""`till merge --snapshot ID --base ID` through the real process: two diverged states of one
workspace (seal A, edit, seal B, rewind to A, edit other things) merged three-way.

What lands, what conflicts (each kind, .git, binary, SQLite), dry runs, the check in a scratch
copy, unrelated live edits surviving, the undo, a merge killed while landing, and the errors.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.harness import assert_crashed, crash, manifest, temp_leftovers
from tests.helpers import git

BASE_TEXT = "".join(f"line {i}\n" for i in range(1, 11))


def _replace_line(text: str, number: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[number - 1] = new + "\n"
    return "".join(lines)


def _snap(till: Till, label: str) -> str:
    return str(till.json("snap", "-m", label)["snapshot"]["id"])


def _head(till: Till) -> dict[str, Any]:
    return dict(till.json("status")["head"])


def _scratch_leftovers(folder: Path) -> list[str]:
    """Merge-check scratch folders left beside the workspace."""
    return [p.name for p in folder.parent.iterdir() if ".merge-check-" in p.name]


@pytest.fixture
def base(till: Till, folder: Path) -> str:
    """Snapshot A: a text file, a few others, a folder."""
    (folder / "text.txt").write_text(BASE_TEXT)
    (folder / "keep.txt").write_text("keep\n")
    (folder / "gone.txt").write_text("to be deleted in theirs\n")
    (folder / "unrelated.txt").write_text("unrelated\n")
    (folder / "src").mkdir()
    (folder / "src" / "mod.py").write_text("X = 1\n")
    return str(till.json("watch", "--no-daemon")["head"]["id"])


def diverge(till: Till, folder: Path, base: str, theirs_edit: Any, ours_edit: Any) -> str:
    """Theirs: `theirs_edit` from A, sealed as B; then the folder goes back to A and gets
    `ours_edit`. Returns B."""
    theirs_edit(folder)
    theirs = _snap(till, "theirs")
    till.json("rewind", base, "--yes")
    ours_edit(folder)
    return theirs


def _theirs_side(folder: Path) -> None:
    (folder / "text.txt").write_text(_replace_line(BASE_TEXT, 9, "line 9 from theirs"))
    (folder / "gone.txt").unlink()
    (folder / "src" / "new.py").write_text("Y = 2\n")
    (folder / "added_dir" / "deep").mkdir(parents=True)
    (folder / "added_dir" / "deep" / "f.txt").write_text("deep\n")


def _ours_side(folder: Path) -> None:
    (folder / "text.txt").write_text(_replace_line(BASE_TEXT, 2, "line 2 from ours"))
    (folder / "unrelated.txt").write_text("ours, live\n")


def test_a_merge_lands_both_sides_and_is_sealed_with_the_snapshot_as_second_parent(
    till: Till, folder: Path, base: str
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    run = till("--json", "merge", "--snapshot", theirs, "--base", base)
    assert run.code == 0, (run.stdout, run.stderr)
    doc = run.doc
    assert {
        "fork",
        "landed",
        "result",
        "changes",
        "conflicts",
        "check_output",
        "check_failed",
        "base",
        "ours",
        "theirs",
        "merged",
        "undo",
    } <= set(doc)
    assert doc["fork"] is None and doc["landed"] is True and doc["conflicts"] == []
    assert doc["check_output"] is None and doc["check_failed"] is False
    assert (doc["base"], doc["theirs"]) == (base, theirs)
    assert doc["merged"] == ["text.txt"]
    want_text = _replace_line(
        _replace_line(BASE_TEXT, 2, "line 2 from ours"), 9, "line 9 from theirs"
    )
    assert (folder / "text.txt").read_text() == want_text
    assert not (folder / "gone.txt").exists()
    assert (folder / "src" / "new.py").read_text() == "Y = 2\n"
    assert (folder / "added_dir" / "deep" / "f.txt").read_text() == "deep\n"
    assert (folder / "unrelated.txt").read_text() == "ours, live\n"
    paths = {c["path"]: c["kind"] for c in doc["changed"]}
    assert paths["text.txt"] == "modified" and paths["gone.txt"] == "deleted"
    assert paths["src/new.py"] == "added" and paths["added_dir/deep/f.txt"] == "added"
    assert doc["changes"] == len(doc["changed"])
    # The result is the head, sealed as a merge, descending from both sides.
    head = _head(till)
    assert head["id"] == doc["result"] and head["trigger"] == "merge"
    assert head["merged_from"] == theirs and head["label"] == f"merge {theirs[:12]}"
    pre = till.json("show", doc["ours"])["snapshot"]
    assert pre["trigger"] == "pre_merge" and doc["undo"] == doc["ours"]
    assert doc["next"] == f"till rewind {doc['ours']} --yes"
    # It is an event.
    events = [line for line in till("--json", "events").stdout.splitlines() if '"merged"' in line]
    assert len(events) == 1 and doc["result"] in events[0] and theirs in events[0]
    assert temp_leftovers(folder) == [] and _scratch_leftovers(folder) == []


def test_rewinding_to_the_pre_merge_snapshot_undoes_the_merge(
    till: Till, folder: Path, base: str
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    before = manifest(folder)
    doc = till.json("merge", "--snapshot", theirs, "--base", base)
    assert manifest(folder) != before
    till.json("rewind", doc["undo"], "--yes")
    assert manifest(folder) == before


def test_a_dry_run_reports_and_changes_nothing(till: Till, folder: Path, base: str) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    before = manifest(folder)
    count = len(till.json("timeline", "-n", "100")["snapshots"])
    run = till("--json", "merge", "--snapshot", theirs, "--base", base, "--dry-run")
    assert run.code == 0, run.stdout
    doc = run.doc
    assert doc["landed"] is False and doc["result"] is None and doc["dry_run"] is True
    assert doc["changes"] >= 4 and doc["merged"] == ["text.txt"] and doc["undo"] is None
    assert manifest(folder) == before
    # Planned from the live folder: nothing sealed (issue 21, item 12).
    assert len(till.json("timeline", "-n", "100")["snapshots"]) == count
    human = till("merge", "--snapshot", theirs, "--base", base, "--dry-run")
    assert (
        human.code == 0 and "would change" in human.stdout and "Nothing was changed" in human.stdout
    )


def _conflicting_theirs(folder: Path) -> None:
    (folder / "text.txt").write_text(_replace_line(BASE_TEXT, 5, "five from theirs"))
    (folder / "keep.txt").unlink()  # modify_delete: ours changes it
    (folder / "gone.txt").write_text("changed in theirs\n")  # delete_modify: ours deletes it
    (folder / "both.txt").write_text("added by theirs\n")  # add_add
    (folder / "src" / "mod.py").unlink()
    (folder / "src" / "mod.py").symlink_to("elsewhere")  # type_change: ours makes it a folder


def _conflicting_ours(folder: Path) -> None:
    (folder / "text.txt").write_text(_replace_line(BASE_TEXT, 5, "five from ours"))
    (folder / "keep.txt").write_text("changed here\n")
    (folder / "gone.txt").unlink()
    (folder / "both.txt").write_text("added here\n")
    (folder / "src" / "mod.py").unlink()
    (folder / "src" / "mod.py").mkdir()


def test_conflicts_land_nothing_and_exit_3_with_every_kind(
    till: Till, folder: Path, base: str
) -> None:
    theirs = diverge(till, folder, base, _conflicting_theirs, _conflicting_ours)
    (folder / "clean.txt").write_text("a one-sided change would land, but not with conflicts\n")
    before = manifest(folder)
    run = till("--json", "merge", "--snapshot", theirs, "--base", base)
    assert run.code == 3, (run.stdout, run.stderr)
    doc = run.doc
    assert doc["landed"] is False and doc["result"] is None
    kinds = {c["path"]: c["kind"] for c in doc["conflicts"]}
    assert kinds == {
        "text.txt": "modify_modify",
        "keep.txt": "modify_delete",
        "gone.txt": "delete_modify",
        "both.txt": "add_add",
        "src/mod.py": "type_change",
    }
    by_path = {c["path"]: c for c in doc["conflicts"]}
    text = by_path["text.txt"]
    assert text["base"]["kind"] == text["ours"]["kind"] == text["theirs"]["kind"] == "file"
    assert len({text["base"]["id"], text["ours"]["id"], text["theirs"]["id"]}) == 3
    assert by_path["keep.txt"]["theirs"] is None and by_path["gone.txt"]["ours"] is None
    assert by_path["both.txt"]["base"] is None
    assert by_path["src/mod.py"]["ours"]["kind"] == "dir"
    assert by_path["src/mod.py"]["theirs"]["kind"] == "symlink"
    assert manifest(folder) == before
    assert _head(till)["trigger"] == "pre_merge"
    # The human page lists them and still exits 3; a dry run exits 3 as well.
    human = till("merge", "--snapshot", theirs, "--base", base)
    assert human.code == 3 and "Nothing landed" in human.stdout
    assert "modify_delete" in human.stdout and "type_change" in human.stdout
    dry = till("--json", "merge", "--snapshot", theirs, "--base", base, "--dry-run")
    assert dry.code == 3 and len(dry.doc["conflicts"]) == 5
    assert manifest(folder) == before


def test_binary_files_and_sqlite_databases_changed_on_both_sides_are_conflicts(
    till: Till, folder: Path
) -> None:
    (folder / "blob.bin").write_bytes(b"\x00\x01header\n" + bytes(range(256)))
    db = sqlite3.connect(folder / "app.db")
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()
    base = str(till.json("watch", "--no-daemon")["head"]["id"])

    def edit(tag: str) -> Any:
        def apply(root: Path) -> None:
            (root / "blob.bin").write_bytes(b"\x00\x01header\n" + tag.encode() * 10)
            conn = sqlite3.connect(root / "app.db")
            conn.execute("INSERT INTO t VALUES (?)", (tag,))
            conn.commit()
            conn.close()

        return apply

    theirs = diverge(till, folder, base, edit("theirs"), edit("ours"))
    run = till("--json", "merge", "--snapshot", theirs, "--base", base)
    assert run.code == 3, run.stdout
    kinds = {c["path"]: (c["kind"], c["reason"]) for c in run.doc["conflicts"]}
    assert kinds["blob.bin"][0] == "modify_modify" and "binary" in kinds["blob.bin"][1]
    assert kinds["app.db"][0] == "modify_modify"


def test_git_changed_on_both_sides_is_one_conflict(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    (folder / "b.txt").write_text("b\n")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "base")
    base = str(till.json("watch", "--no-daemon")["head"]["id"])

    def commit(name: str) -> Any:
        def apply(root: Path) -> None:
            (root / name).write_text(f"{name} changed\n")
            git(root, "commit", "-qam", f"change {name}")

        return apply

    theirs = diverge(till, folder, base, commit("a.txt"), commit("b.txt"))
    before = manifest(folder)
    run = till("--json", "merge", "--snapshot", theirs, "--base", base)
    assert run.code == 3, run.stdout
    kinds = {c["path"]: c["kind"] for c in run.doc["conflicts"]}
    assert kinds == {".git": "modify_modify"}
    assert manifest(folder) == before
    # Only one side changed .git: its changes land with the rest.
    till.json("rewind", base, "--yes")
    doc = till.json("merge", "--snapshot", theirs, "--base", base)
    assert doc["landed"] is True
    assert git(folder, "log", "--format=%s", "-1").strip() == "change a.txt"
    assert git(folder, "status", "--porcelain").strip() == ""


def test_a_passing_check_runs_in_a_scratch_copy_and_the_merge_lands(
    till: Till, folder: Path, base: str, tmp_path: Path
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    seen = tmp_path / "seen.txt"
    check = (
        f"pwd > {seen}; echo TILLAGE_MERGE_CHECK=$TILLAGE_MERGE_CHECK >> {seen}; "
        "grep -q 'line 9 from theirs' text.txt && grep -q 'line 2 from ours' text.txt && "
        "test -f src/new.py && test ! -e gone.txt && test ! -e .tillage && echo checked-ok"
    )
    run = till("--json", "merge", "--snapshot", theirs, "--base", base, "--check", check)
    assert run.code == 0, (run.stdout, run.stderr)
    doc = run.doc
    assert doc["landed"] is True and doc["check_failed"] is False
    assert "checked-ok" in doc["check_output"]
    where, env = seen.read_text().splitlines()
    assert Path(where).resolve() != folder.resolve()
    assert folder.resolve() not in Path(where).resolve().parents
    assert not Path(where).exists() and _scratch_leftovers(folder) == []
    assert env == "TILLAGE_MERGE_CHECK=1"
    assert (folder / "src" / "new.py").exists()
    human = till("merge", "--snapshot", theirs, "--base", base, "--check", "echo again")
    assert human.code == 0
    assert "To undo the merge, run:" in human.stdout or "Nothing to merge" in human.stdout


def test_a_failing_check_lands_nothing(till: Till, folder: Path, base: str, tmp_path: Path) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    before = manifest(folder)
    seen = tmp_path / "where.txt"
    check = f"pwd > {seen}; echo the tests failed; exit 7"
    run = till("--json", "merge", "--snapshot", theirs, "--base", base, "--check", check)
    assert run.code == 3, (run.stdout, run.stderr)
    doc = run.doc
    assert doc["landed"] is False and doc["check_failed"] is True and doc["result"] is None
    assert doc["check_exit_code"] == 7 and "the tests failed" in doc["check_output"]
    assert doc["conflicts"] == []
    assert manifest(folder) == before
    where = Path(seen.read_text().strip())
    assert where.resolve() != folder.resolve() and not where.exists()
    assert _scratch_leftovers(folder) == []
    assert _head(till)["trigger"] == "pre_merge"
    human = till("merge", "--snapshot", theirs, "--base", base, "--check", check)
    assert human.code == 3
    assert "failed (exit 7)" in human.stdout and "the tests failed" in human.stdout


def test_live_edits_made_while_merging_survive_and_a_landing_path_edited_is_refused(
    till: Till, folder: Path, base: str
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    # The check runs after the pre_merge seal: it stands in for someone editing meanwhile.
    live = folder.resolve()
    elsewhere = f"echo 'edited while merging' > {live}/unrelated.txt"
    doc = till.json("merge", "--snapshot", theirs, "--base", base, "--check", elsewhere)
    assert doc["landed"] is True
    assert (folder / "unrelated.txt").read_text() == "edited while merging\n"
    assert (folder / "src" / "new.py").exists()
    # Edit a path the merge would land: it is refused, the edit kept.
    till.json("rewind", base, "--yes")
    _ours_side(folder)
    clobber = f"sleep 0.05; echo mine > {live}/src/new.py"
    run = till("--json", "merge", "--snapshot", theirs, "--base", base, "--check", clobber)
    assert run.code == 3, run.stdout
    assert [c["path"] for c in run.doc["conflicts"]] == ["src/new.py"]
    assert run.doc["landed"] is False
    assert (folder / "src" / "new.py").read_text() == "mine\n"
    assert (folder / "text.txt").read_text() == _replace_line(BASE_TEXT, 2, "line 2 from ours")


# Where a merge is killed in the tests below; merge.after_seal is its own (between its seal and
# the fact or event that tells it), the others are the rewind machinery's that it lands with.
MERGE_FAILPOINTS = (
    "rewind.after_intent",
    "rewind.after_first_action",
    "merge.after_seal",
    "rewind.before_intent_removed",
)


@pytest.mark.parametrize("failpoint", MERGE_FAILPOINTS)
def test_a_merge_killed_while_landing_is_finished_by_the_next_command(
    till: Till, folder: Path, base: str, failpoint: str
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    (folder / "later.txt").write_text("")
    proc = crash(till, failpoint, "kill", "--json", "merge", "--snapshot", theirs, "--base", base)
    assert_crashed(proc, failpoint, "kill")
    assert sorted(p.name for p in (till.home / "intents").iterdir()) != []
    till.json("status")
    assert list((till.home / "intents").iterdir()) == []
    assert temp_leftovers(folder) == []
    want_text = _replace_line(
        _replace_line(BASE_TEXT, 2, "line 2 from ours"), 9, "line 9 from theirs"
    )
    assert (folder / "text.txt").read_text() == want_text
    assert (folder / "src" / "new.py").read_text() == "Y = 2\n"
    assert not (folder / "gone.txt").exists()
    assert (folder / "unrelated.txt").read_text() == "ours, live\n"
    snapshots = till.json("timeline", "-n", "100")["snapshots"]
    merges = [s for s in snapshots if s["trigger"] == "merge"]
    assert len(merges) == 1 and merges[0]["merged_from"] == theirs
    events = [line for line in till("--json", "events").stdout.splitlines() if '"merged"' in line]
    assert len(events) == 1


def test_merge_errors(till: Till, folder: Path, base: str, user_home: Path) -> None:
    snapshots = len(till.json("timeline", "-n", "1000")["snapshots"])
    blank = till("--json", "merge", "--snapshot", base, "--check", " ")
    assert blank.code == 1 and blank.error["code"] == -32066
    assert len(till.json("timeline", "-n", "1000")["snapshots"]) == snapshots  # nothing sealed
    neither = till("--json", "merge")
    assert neither.code == 1 and neither.error["code"] == -32066
    assert neither.error["name"] == "merge.bad_request"
    both = till("--json", "merge", "name", "--snapshot", base)
    assert both.code == 1 and both.error["name"] == "merge.bad_request"
    stray = till("--json", "merge", "name", "--base", base)
    assert stray.code == 1 and stray.error["code"] == -32066
    unknown = till("--json", "merge", "nosuchfork")
    assert unknown.code == 1 and unknown.error["code"] == -32061
    assert "till forks" in unknown.error["next"]
    missing = till("--json", "merge", "--snapshot", "abcdef123456")
    assert missing.code == 1 and missing.error["code"] == -32061
    human = till("merge", "nosuchfork")
    assert human.code == 1 and "nosuchfork" in human.stderr
    # A snapshot of an unrelated workspace in the same store: no common ancestor.
    other = user_home / "other"
    other.mkdir()
    (other / "x.txt").write_text("x\n")
    stranger = till.json("watch", "--no-daemon", cwd=other)["head"]["id"]
    lone = till("--json", "merge", "--snapshot", stranger)
    assert lone.code == 1 and lone.error["name"] == "merge.no_common_ancestor"
    assert "--base" in lone.error["next"]
    # Given a base, it merges like any other snapshot (here: everything is an add/add or
    # one-sided, so it is planned, not refused).
    dry = till("--json", "merge", "--snapshot", stranger, "--base", base, "--dry-run")
    assert dry.code in (0, 3), dry.stdout
    assert sorted(os.listdir(other)) == [".tillage", "x.txt"]  # the other folder is untouched


@pytest.mark.process
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_check_leaves_no_scratch_copy_and_lands_nothing(
    till: Till, folder: Path, base: str, tmp_path: Path, sig: int
) -> None:
    theirs = diverge(till, folder, base, _theirs_side, _ours_side)
    before = manifest(folder)
    started = tmp_path / "started"
    check = f"touch {started}; sleep 30"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "merge", "--snapshot", theirs, "--base", base,
         "--check", check],
        cwd=folder,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the check never started"
        time.sleep(0.02)
    assert len(_scratch_leftovers(folder)) == 1
    proc.send_signal(sig)
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), out
    assert json.loads(out)["error"]["name"] == "interrupted"
    assert _scratch_leftovers(folder) == []
    assert manifest(folder) == before
    assert list((till.home / "intents").iterdir()) == []


def test_modes_merge_apart_from_contents(till: Till, folder: Path, base: str) -> None:
    def theirs_side(root: Path) -> None:
        (root / "keep.txt").chmod(0o755)
        (root / "unrelated.txt").chmod(0o600)

    def ours_side(root: Path) -> None:
        (root / "keep.txt").write_text("edited here\n")
        (root / "unrelated.txt").chmod(0o640)

    theirs = diverge(till, folder, base, theirs_side, ours_side)
    run = till("--json", "merge", "--snapshot", theirs, "--base", base)
    assert run.code == 3, run.stdout
    assert [(c["path"], c["kind"]) for c in run.doc["conflicts"]] == [
        ("unrelated.txt", "modify_modify")
    ]
    assert run.doc["conflicts"][0]["ours"]["mode"] == "0640"
    assert run.doc["conflicts"][0]["theirs"]["mode"] == "0600"
    (folder / "unrelated.txt").chmod(0o644)  # back to the base's mode: theirs' now lands
    doc = till.json("merge", "--snapshot", theirs, "--base", base)
    assert doc["landed"] is True
    assert (folder / "keep.txt").read_text() == "edited here\n"
    assert (folder / "keep.txt").stat().st_mode & 0o777 == 0o755
    assert (folder / "unrelated.txt").stat().st_mode & 0o777 == 0o600
    kinds = {c["path"]: c["kind"] for c in doc["changed"]}
    assert kinds == {"keep.txt": "mode_changed", "unrelated.txt": "mode_changed"}
