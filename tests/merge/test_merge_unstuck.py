"""A merge a user is not stuck with (issue 21, items 6, 7, 11 and 12, and the preview digest):
a fork whose pointer `git clean -fdx` removed is still the fork, one path is one conflict, a
dry run writes nothing, and `--expect` lands only the plan that was previewed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import Till


def _fork_root(folder: Path, name: str) -> Path:
    return folder.parent / f"{folder.name}.forks" / name


def _git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _snapshots(till: Till, cwd: Path | None = None) -> int:
    return len(till.json("timeline", "-n", "1000", cwd=cwd)["snapshots"])


# -- item 7: a fork whose pointer was removed -------------------------------------------------


def test_a_fork_cleaned_with_git_clean_is_still_merged_from_the_parent(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    _git(folder, "init", "-q")
    _git(folder, "add", "a.txt")
    _git(folder, "commit", "-q", "-m", "a")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    _git(fork, "clean", "-fdxq")
    assert not (fork / ".tillage").exists()
    (fork / "a.txt").write_text("a from the fork\n")

    assert till.json("forks")["forks"][0]["path"] == str(fork)
    merged = till.json("merge", "k")

    assert merged["landed"] and merged["changes"] == 1
    assert (folder / "a.txt").read_text() == "a from the fork\n"
    assert (fork / ".tillage").is_dir()  # the pointer is back


def test_a_folder_made_anew_at_the_forks_path_is_not_taken_for_the_fork(
    till: Till, folder: Path
) -> None:
    """A folder replaced at the fork's path would read as every file deleted: refused."""
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    shutil.rmtree(fork)
    fork.mkdir()  # ext4 may hand it the old folder's inode number again
    (fork / "a.txt").write_text("a\n")

    run = till("--json", "merge", "k")

    assert run.code == 1 and run.error["name"] == "fork.not_the_fork"
    assert (folder / "a.txt").read_text() == "a\n"


# -- item 11: one path, one conflict ----------------------------------------------------------


def test_a_folder_made_a_file_while_the_other_side_edits_inside_it_names_both(
    till: Till, folder: Path
) -> None:
    (folder / "d").mkdir()
    (folder / "d" / "f.txt").write_text("f\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    shutil.rmtree(fork / "d")
    (fork / "d").write_text("now a file\n")
    (folder / "d" / "f.txt").write_text("f edited here\n")

    run = till("--json", "merge", "k")

    assert run.code == 3
    paths = [c["path"] for c in run.doc["conflicts"]]
    assert sorted(paths) == ["d", "d/f.txt"]
    by_path = {c["path"]: c["kind"] for c in run.doc["conflicts"]}
    assert by_path == {"d": "type_change", "d/f.txt": "modify_delete"}


# -- item 12 and the preview digest ------------------------------------------------------------


def test_a_dry_run_merge_seals_nothing_on_either_side(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "b.txt").write_text("the fork's\n")
    (folder / "c.txt").write_text("the parent's\n")
    before = (_snapshots(till), _snapshots(till, cwd=fork))
    events = till("--json", "events").stdout

    preview = till.json("merge", "k", "--dry-run")

    assert preview["dry_run"] and not preview["landed"]
    assert [c["path"] for c in preview["changed"]] == ["b.txt"]
    assert (_snapshots(till), _snapshots(till, cwd=fork)) == before
    assert till("--json", "events").stdout == events
    assert not (folder / "b.txt").exists()


def test_a_dry_run_merges_text_from_the_live_files(till: Till, folder: Path) -> None:
    (folder / "t.txt").write_text("1\n2\n3\n4\n5\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "t.txt").write_text("1\n2\n3\n4\nfive\n")
    (folder / "t.txt").write_text("one\n2\n3\n4\n5\n")

    preview = till.json("merge", "k", "--dry-run")

    assert preview["merged"] == ["t.txt"] and preview["conflicts"] == []
    landed = till.json("merge", "k", "--expect", preview["preview_digest"])
    assert landed["landed"]
    assert (folder / "t.txt").read_text() == "one\n2\n3\n4\nfive\n"


def test_a_merge_lands_the_previewed_plan_when_nothing_changed(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "b.txt").write_text("b\n")
    preview = till.json("merge", "k", "--dry-run")
    (folder / "unrelated.txt").write_text("the parent goes on working\n")

    landed = till.json("merge", "k", "--expect", preview["preview_digest"])

    assert landed["landed"] and landed["preview_digest"] == preview["preview_digest"]
    assert (folder / "b.txt").read_text() == "b\n"


def test_a_merge_whose_plan_changed_since_the_preview_is_refused(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "b.txt").write_text("b\n")
    preview = till.json("merge", "k", "--dry-run")
    (fork / "b.txt").write_text("b, changed after the preview\n")

    run = till("--json", "merge", "k", "--expect", preview["preview_digest"])

    assert run.code == 1 and run.error["name"] == "merge.stale_preview"
    assert not (folder / "b.txt").exists()


def test_a_preview_digest_that_is_not_one_is_a_usage_error(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    run = till("--json", "merge", "k", "--expect", "not-a-digest")
    assert run.code == 1 and run.error["name"] == "invalid_argument"


# -- item 14: what a failed merge tells a person ------------------------------------------------


def test_a_failed_checks_retry_keeps_the_check_and_its_output_is_printed_once(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "b.txt").write_text("b\n")

    doc = till("--json", "merge", "k", "--check", "echo the-check-said-so; exit 4")
    human = till("merge", "k", "--check", "echo the-check-said-so; exit 4")

    assert (
        doc.code == 3 and doc.doc["next"] == "till merge k --check 'echo the-check-said-so; exit 4'"
    )
    assert human.code == 3
    assert human.stdout.splitlines().count("the-check-said-so") == 1  # live, not again
    assert "till merge k --check 'echo the-check-said-so; exit 4'" in human.stdout + human.stderr


def test_a_conflicts_retry_keeps_the_check(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "a.txt").write_text("theirs\n")
    (folder / "a.txt").write_text("ours\n")

    run = till("--json", "merge", "k", "--check", "true")

    assert run.code == 3 and run.doc["next"] == "till merge k --check true"


# -- item 6: git's own files --------------------------------------------------------------------


def _repo(folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    (folder / "b.txt").write_text("b\n")
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "base")


def _refresh_index(folder: Path) -> None:
    """What `git status` does after a tool rewrote tracked files: the index is rewritten."""
    index = (folder / ".git" / "index").read_bytes()
    for name in ("a.txt", "b.txt"):
        path = folder / name
        path.write_text(path.read_text())  # same bytes, a later mtime
        later = path.stat().st_mtime + 10
        os.utime(path, (later, later))
    _git(folder, "status", "--porcelain")
    assert (folder / ".git" / "index").read_bytes() != index


def test_git_status_in_the_parent_does_not_block_merging_a_fork_that_committed(
    till: Till, folder: Path
) -> None:
    _repo(folder)
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "a.txt").write_text("a from the fork\n")
    _git(fork, "commit", "-q", "-am", "the fork's commit")
    _refresh_index(folder)

    merged = till.json("merge", "k")

    assert merged["landed"], merged["conflicts"]
    assert _git(folder, "log", "--format=%s", "-1").strip() == "the fork's commit"
    assert _git(folder, "status", "--porcelain").strip() == ""
    assert (folder / "a.txt").read_text() == "a from the fork\n"


def test_a_parent_that_committed_keeps_its_history_over_a_fork_that_ran_git_status(
    till: Till, folder: Path
) -> None:
    _repo(folder)
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "new.txt").write_text("the fork's new file\n")
    _refresh_index(fork)
    (folder / "b.txt").write_text("b from the parent\n")
    _git(folder, "commit", "-q", "-am", "the parent's commit")

    merged = till.json("merge", "k")

    assert merged["landed"], merged["conflicts"]
    assert _git(folder, "log", "--format=%s", "-1").strip() == "the parent's commit"
    assert _git(folder, "status", "--porcelain").strip() == "?? new.txt"


def test_both_sides_committing_is_one_conflict_at_git_that_says_to_use_git(
    till: Till, folder: Path
) -> None:
    _repo(folder)
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "a.txt").write_text("a from the fork\n")
    _git(fork, "commit", "-q", "-am", "the fork's commit")
    (folder / "b.txt").write_text("b from the parent\n")
    _git(folder, "commit", "-q", "-am", "the parent's commit")

    run = till("--json", "merge", "k")

    assert run.code == 3
    (conflict,) = run.doc["conflicts"]
    assert conflict["path"] == ".git" and "git" in conflict["reason"]
    assert _git(folder, "log", "--format=%s", "-1").strip() == "the parent's commit"
