"""`till clone` makes exactly its own folder a new workspace, or nothing: into a folder inside an
attached workspace (a nested workspace the outer one never touches), from a URL typed relative
to the caller's folder, refused inside the store, and killed at every step then retried."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import Till
from tests.faults.campaign import BASE_SEED
from tests.faults.harness import crash, manifest, run_marked
from tests.sync.conftest import Machine, Site
from tillage.platform.folders import remove_folder

# Every durable step of a clone (features/sync/clone.py, pending.py), in order.
CLONE_FAILPOINTS = (
    "clone.after_intent",
    "clone.after_parents",
    "seal.before_publish",  # the first snapshot durable in a pack, not yet in the log
    "clone.after_snapshot",
    "clone.after_materialize",
    "clone.after_records",
    "clone.after_commit",
    "clone.mid_move",
    "clone.after_attach",
)
# A kill at these points comes after the commit: the next command finishes the clone.
COMMITTED = frozenset({"clone.after_commit", "clone.mid_move", "clone.after_attach"})


def _pushed(tmp_path: Path, user_home: Path) -> tuple[Path, str]:
    """A folder remote holding one pushed ref (`main`: two files in a folder), and its key."""
    pusher = Till(tmp_path / "home-a", user_home, user_home / "source")
    source = pusher.cwd
    (source / "docs").mkdir(parents=True)
    (source / "readme.md").write_text("the project\n")
    (source / "docs" / "guide.md").write_text("how\n")
    pusher.json("watch", "--no-daemon")
    remote = user_home / "remote"
    key: str = pusher.json("remote", "add", str(remote))["key"]
    pusher.json("sync", "--push")
    return remote, key


def _timeline(till: Till, cwd: Path) -> list[str]:
    return [s["id"] for s in till.json("timeline", cwd=cwd)["snapshots"]]


def test_a_clone_inside_an_attached_workspace_is_a_workspace_of_its_own(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "outer")
    outer = till.cwd
    (outer / "src").mkdir(parents=True)
    (outer / "p.txt").write_text("precious\n")
    (outer / "src" / "main.py").write_text("print('outer')\n")
    till.json("watch", "--no-daemon")
    before = manifest(outer)
    timeline = _timeline(till, outer)

    cloned = till.json("clone", str(remote), "sub", "--key", key)

    sub = outer / "sub"
    assert cloned["workspace"] == str(sub)
    assert (sub / "readme.md").read_text() == "the project\n"
    assert (sub / "docs" / "guide.md").read_text() == "how\n"
    # The outer workspace: its files, its timeline and its remotes exactly as they were.
    after = {p: v for p, v in manifest(outer).items() if p != "sub" and not p.startswith("sub/")}
    assert after == before
    assert _timeline(till, outer) == timeline
    assert till.json("remote", "list", cwd=outer)["remotes"] == []
    # The clone: its own workspace, with origin, in step with the remote.
    status = till.json("status", cwd=sub)
    assert status["workspace"] == str(sub)
    assert [r["name"] for r in till.json("remote", "list", cwd=sub)["remotes"]] == ["origin"]
    assert till.json("sync", "--pull", cwd=sub)["disposition"] == "up_to_date"
    # The outer's seals stop at it, and its rewinds leave it alone.
    snap = till.json("snap", cwd=outer)["snapshot"]
    assert snap["files"] == 2
    shown = till.json("show", snap["id"], cwd=outer)
    assert not any(str(f.get("path", "")).startswith("sub") for f in shown.get("files", []))
    (sub / "readme.md").write_text("edited in the clone\n")
    (outer / "p.txt").write_text("changed\n")
    (outer / "new.txt").write_text("made after\n")
    till.json("rewind", timeline[-1], "--yes", cwd=outer)
    assert (outer / "p.txt").read_text() == "precious\n" and not (outer / "new.txt").exists()
    assert (sub / "readme.md").read_text() == "edited in the clone\n"
    assert (sub / ".tillage" / "workspace.json").exists()
    assert till.json("status", cwd=sub)["workspace"] == str(sub)
    till.json("fork", "k", cwd=outer)  # a fork of the outer copies the outer alone
    copy = outer.parent / "outer.forks" / "k"
    assert (copy / "p.txt").read_text() == "precious\n" and not (copy / "sub").exists()
    for name in ("workspace.json", ".gitignore"):  # `git clean -fdx` in the clone
        (sub / ".tillage" / name).unlink()
    (sub / ".tillage").rmdir()
    assert till.json("snap", cwd=outer)["snapshot"]["files"] == 2  # the catalog knows it
    assert till.json("status", cwd=sub)["workspace"] == str(sub)  # and puts its pointer back


def test_an_outer_rewind_to_before_the_clone_never_touches_the_clone(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "outer")
    outer = till.cwd
    (outer / "deep" / "sub").mkdir(parents=True)  # an empty folder, sealed by the outer
    (outer / "deep" / "note.txt").write_text("n\n")
    till.json("watch", "--no-daemon")
    first = _timeline(till, outer)[0]
    (outer / "deep" / "note.txt").unlink()
    (outer / "deep" / "sub").rmdir()
    (outer / "deep").rmdir()
    till.json("snap")

    till.json("clone", str(remote), "deep/sub", "--key", key)
    preview = till.json("rewind", first, "--dry-run")["changes"]
    assert [c["path"] for c in preview] == ["deep/note.txt"]  # not deep/sub
    till.json("rewind", first, "--yes")  # the outer's deep/ and deep/sub come back...
    sub = outer / "deep" / "sub"
    assert (outer / "deep" / "note.txt").read_text() == "n\n"
    assert (sub / "readme.md").read_text() == "the project\n"  # ...around the clone
    assert till.json("status", cwd=sub)["workspace"] == str(sub)
    gone = till.json("rewind", _timeline(till, outer)[1], "--yes")  # deep/ is not in it: emptied
    assert gone["applied"] is True
    assert (sub / "readme.md").read_text() == "the project\n"
    assert not (outer / "deep" / "note.txt").exists()


def test_a_clone_of_a_relative_url_resolves_it_from_the_callers_folder(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    work = user_home / "work"
    work.mkdir()
    till = Till(tmp_path / "home-b", user_home, work)
    cloned = till.json("clone", "../remote", "proj", "--key", key)
    proj = work / "proj"
    assert cloned["workspace"] == str(proj)
    assert os.path.normpath(cloned["remote"]) == str(remote)
    assert (proj / "readme.md").read_text() == "the project\n"
    assert till.json("sync", "--pull", cwd=proj)["disposition"] == "up_to_date"
    listed = till.json("remote", "list", cwd=proj)["remotes"]
    assert os.path.normpath(listed[0]["remote"]) == str(remote)


def test_a_clone_into_the_store_is_refused_and_leaves_nothing(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    store = tmp_path / "home-b"
    till = Till(store, user_home, user_home)
    till.json("version")
    inside = store / "inside" / "deeper"
    run = till("--json", "clone", str(remote), str(inside), "--key", key)
    assert run.code == 1 and run.error["name"] == "workspace.refused_root", run.stdout
    assert not (store / "inside").exists()


def test_a_clone_into_a_control_folder_is_refused(tmp_path: Path, user_home: Path) -> None:
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "outer")
    till.cwd.mkdir()
    till.json("watch", "--no-daemon")
    before = sorted(os.listdir(till.cwd / ".tillage"))
    run = till("--json", "clone", str(remote), ".tillage/x", "--key", key)
    assert run.code == 1 and run.error["name"] == "invalid_argument", run.stdout
    assert sorted(os.listdir(till.cwd / ".tillage")) == before


def test_a_clone_through_a_symlinked_dest_is_refused_and_says_why(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    (tmp_path / "elsewhere").mkdir()
    (user_home / "link").symlink_to(tmp_path / "elsewhere")
    till = Till(tmp_path / "home-b", user_home, user_home)
    run = till("--json", "clone", str(remote), "link", "--key", key)
    assert run.code == 1 and run.error["name"] == "invalid_argument", run.stdout
    assert "is a symbolic link" in run.error["message"]
    assert os.listdir(tmp_path / "elsewhere") == []  # nothing was written through it


def test_a_clone_into_an_attached_empty_folder_is_refused(tmp_path: Path, user_home: Path) -> None:
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "empty")
    till.cwd.mkdir()
    till.json("watch", "--no-daemon")
    (till.cwd / ".tillage" / "workspace.json").unlink()
    (till.cwd / ".tillage" / ".gitignore").unlink()
    (till.cwd / ".tillage").rmdir()  # empty, and still attached (the catalog knows it)
    run = till("--json", "clone", str(remote), str(till.cwd), "--key", key, cwd=user_home)
    assert run.code == 1 and run.error["name"] == "conflict", run.stdout
    assert os.listdir(till.cwd) == []


def test_a_clone_into_an_existing_empty_folder_fills_it(tmp_path: Path, user_home: Path) -> None:
    remote, key = _pushed(tmp_path, user_home)
    dest = user_home / "empty"
    dest.mkdir()
    inode = os.stat(dest).st_ino
    till = Till(tmp_path / "home-b", user_home, dest)
    cloned = till.json("clone", str(remote), ".", "--key", key)
    assert cloned["workspace"] == str(dest)
    assert os.stat(dest).st_ino == inode  # the very folder, so a shell inside it stays there
    assert sorted(os.listdir(dest)) == [".tillage", "docs", "readme.md"]


def _leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if "tillage-tmp" in n)


@pytest.mark.parametrize("into", ["new", "existing"])
@pytest.mark.parametrize("failpoint", CLONE_FAILPOINTS)
def test_a_killed_clone_leaves_a_finished_clone_or_nothing_and_a_retry_works(
    tmp_path: Path, user_home: Path, failpoint: str, into: str
) -> None:
    if failpoint == "clone.mid_move" and into == "new":
        pytest.skip("a clone into a new folder moves it in one rename")
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "outer")
    outer = till.cwd
    outer.mkdir()
    (outer / "p.txt").write_text("precious\n")
    till.json("watch", "--no-daemon")
    dest = outer / "nested" / "proj"
    if into == "existing":
        dest.mkdir(parents=True)
    before = manifest(outer)
    timeline = _timeline(till, outer)

    proc = crash(till, failpoint, "kill", "--json", "clone", str(remote), str(dest), "--key", key)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)

    # Whatever the kill left, the outer workspace's own files are as they were.
    outside = {p: v for p, v in manifest(outer).items() if not p.startswith("nested")}
    assert outside == {p: v for p, v in before.items() if not p.startswith("nested")}
    retried = till("--json", "clone", str(remote), str(dest), "--key", key)
    assert retried.code == 0, (retried.stdout, retried.stderr)
    assert retried.doc["workspace"] == str(dest)
    assert (dest / "readme.md").read_text() == "the project\n"
    assert sorted(os.listdir(dest)) == [".tillage", "docs", "readme.md"]
    assert _leftovers(dest.parent) == [] and _leftovers(dest) == []
    assert not list((till.home / "intents").glob("clone-*"))
    assert till.json("status", cwd=dest)["workspace"] == str(dest)
    assert till.json("sync", "--pull", cwd=dest)["disposition"] == "up_to_date"
    assert len(till.json("remote", "list", cwd=dest)["remotes"]) == 1
    assert _timeline(till, outer) == timeline
    assert till.json("remote", "list", cwd=outer)["remotes"] == []
    assert till.json("snap", cwd=outer)["snapshot"]["files"] == 1  # p.txt alone
    assert till.json("verify")["ok"] is True  # nothing the killed clone made is a problem


@pytest.mark.parametrize("failpoint", CLONE_FAILPOINTS[:6])
def test_a_clone_killed_before_its_commit_is_undone_by_the_next_command(
    tmp_path: Path, user_home: Path, failpoint: str
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    work = user_home / "work"
    work.mkdir()
    till = Till(tmp_path / "home-b", user_home, work)
    dest = work / "a" / "b" / "proj"
    proc = crash(till, failpoint, "kill", "--json", "clone", str(remote), str(dest), "--key", key)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
    (work / "other").mkdir()
    till.json("watch", "--no-daemon", cwd=work / "other")  # any next command undoes it
    assert sorted(os.listdir(work)) == ["other"]  # no a/, no staging folder
    assert not list((till.home / "intents").glob("clone-*"))
    assert list((till.home / "remotes").glob("*.json")) == []  # no remote entry kept
    assert till.json("verify")["ok"] is True


def test_a_clone_killed_after_its_commit_is_finished_by_the_next_command(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    work = user_home / "work"
    work.mkdir()
    till = Till(tmp_path / "home-b", user_home, work)
    args = ("--json", "clone", str(remote), "proj", "--key", key)
    assert crash(till, "clone.after_commit", "kill", *args).returncode == -9
    assert not (work / "proj").exists()  # committed, not yet in place
    assert till("--json", "status", cwd=work).error["name"] == "workspace.not_attached"
    status = till.json("status", cwd=work / "proj")  # the command before put it there
    assert status["workspace"] == str(work / "proj")
    intents = list((till.home / "intents").glob("clone-*"))
    assert intents == [], [json.loads(p.read_text()) for p in intents]


def test_a_clone_of_a_mistyped_ssh_path_makes_nothing_on_the_far_side(
    ssh_site: Site, machines: Callable[[Site], tuple[Machine, Machine]], folder: Path
) -> None:
    a, b = machines(ssh_site)
    (folder / "a.txt").write_text("a")
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", ssh_site.url)["key"]
    a.json("sync", "--push")
    there = Path(urlsplit(ssh_site.url).path)
    mistyped = ssh_site.url.replace(there.name, f"{there.name}-typo/deeper")

    run = b("--json", "clone", mistyped, "copy", "--key", key)

    assert run.code == 1 and run.error["name"] == "sync.not_a_remote", run.stdout
    assert not (there.parent / f"{there.name}-typo").exists()  # nothing made on the far side
    assert not (b.cwd / "copy").exists()
    cloned = b.json("clone", ssh_site.url, "copy", "--key", key)  # the right path works
    assert (Path(cloned["workspace"]) / "a.txt").read_text() == "a"


def test_till_watch_in_the_folder_of_a_killed_clone_finishes_that_clone(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    dest = user_home / "empty"
    dest.mkdir()
    till = Till(tmp_path / "home-b", user_home, dest)
    args = ("--json", "clone", str(remote), str(dest), "--key", key)
    assert crash(till, "clone.after_commit", "kill", *args).returncode == -9
    watched = till.json("watch", "--no-daemon")  # the clone, not a second workspace
    assert watched["workspace"] == str(dest)
    assert watched["attached_now"] is False
    assert till.json("sync", "--pull")["disposition"] == "up_to_date"
    assert sorted(os.listdir(dest)) == [".tillage", "docs", "readme.md"]


def test_a_killed_clone_whose_place_was_taken_meanwhile_is_undone(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    work = user_home / "work"
    work.mkdir()
    till = Till(tmp_path / "home-b", user_home, work)
    args = ("--json", "clone", str(remote), "proj", "--key", key)
    assert crash(till, "clone.after_commit", "kill", *args).returncode == -9
    (work / "proj").mkdir()
    (work / "proj" / "mine.txt").write_text("the person's\n")
    till("--json", "status")  # any command: the clone cannot go there now, so it is undone
    assert os.listdir(work / "proj") == ["mine.txt"]
    assert sorted(os.listdir(work)) == ["proj"]  # no staging folder left
    assert not list((till.home / "intents").glob("clone-*"))
    assert list((till.home / "remotes").glob("*.json")) == []


def _committed(home: Path) -> bool:
    """Whether a clone's intent in the store says it was committed (what the next command
    then finishes rather than undoes)."""
    return any(
        json.loads(p.read_bytes()).get("committed") is True
        for p in (home / "intents").glob("clone-*.json")
    )


@pytest.mark.parametrize("round_", range(6))
def test_a_clone_killed_at_a_random_moment_completes_or_leaves_nothing(
    tmp_path: Path, user_home: Path, round_: int
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    till = Till(tmp_path / "home-b", user_home, user_home / "outer")
    outer = till.cwd
    outer.mkdir()
    (outer / "p.txt").write_text("precious\n")
    till.json("watch", "--no-daemon")
    timing = run_marked(
        till, ["--json", "clone", str(remote), "timed", "--key", key], markers=CLONE_FAILPOINTS
    )
    assert timing.returncode == 0, timing.stdout
    begun = timing.at("clone.after_intent")
    assert begun is not None
    rng = random.Random(BASE_SEED * 100 + round_)
    moment = rng.uniform(0, (timing.end_ns - begun) / 1e9)
    dest = outer / "nested" / "proj"
    args = ["--json", "clone", str(remote), str(dest), "--key", key]
    killed = run_marked(
        till, args, anchor="clone.after_intent", kill_after=moment, markers=CLONE_FAILPOINTS
    )
    passed = [name for name, _ns in killed.marks]
    assert (outer / "p.txt").read_text() == "precious\n", passed
    if killed.returncode != -9:  # it finished first
        assert killed.returncode == 0, killed.stdout
    elif "clone.after_commit" not in passed and not _committed(till.home):
        # Killed before its commit (the marker follows the commit's write, so the intent itself
        # says whether the kill came between the two): nothing is left.
        till("--json", "status")  # the next command undoes it
        assert not os.path.lexists(outer / "nested"), passed
    # Killed after its last step (the intent removed): it is finished, and a retry says so.
    finished = not list((till.home / "intents").glob("clone-*")) and (dest / ".tillage").is_dir()
    retried = till("--json", "clone", str(remote), str(dest), "--key", key)
    if killed.returncode == 0 or finished:
        assert retried.code == 1 and retried.error["name"] == "invalid_argument"
    else:
        assert retried.code == 0, (passed[-2:], retried.stdout)
    assert sorted(os.listdir(dest)) == [".tillage", "docs", "readme.md"], passed
    assert till.json("sync", "--pull", cwd=dest)["disposition"] == "up_to_date"
    assert sorted(os.listdir(outer)) == [".tillage", "nested", "p.txt", "timed"]
    assert _leftovers(outer / "nested") == []


def test_a_clone_into_the_place_of_a_deleted_workspace_is_a_new_workspace(
    tmp_path: Path, user_home: Path
) -> None:
    remote, key = _pushed(tmp_path, user_home)
    work = user_home / "work"
    work.mkdir()
    till = Till(tmp_path / "home-b", user_home, work)
    first = till.json("clone", str(remote), "proj", "--key", key)
    old_id = till.json("status", cwd=work / "proj")["id"]
    remove_folder(work / "proj")
    again = till.json("clone", str(remote), "proj", "--key", key)
    assert again["workspace"] == first["workspace"]
    status = till.json("status", cwd=work / "proj")
    assert status["id"] != old_id and status["snapshots"] == 1
    assert till.json("sync", "--pull", cwd=work / "proj")["disposition"] == "up_to_date"
