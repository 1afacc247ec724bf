"""Every command a person is told to run next runs: each scene below makes a state a person
meets, collects every `till …` its pages and errors print (backticked in a sentence, or on a
line of its own), and runs them in the order printed, in the folder a person would be in. Each
must be a known command whose flags parse, with no placeholder left in it (NAME, ID), and must
succeed or refuse cleanly: a public error, never usage, internal, not_attached, not_found or
another confirmation_required. Printed IDs are the 12 characters people read.

Tool results (for models) are spoken by verbs/tool_speech.py and tested there."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import Run, Till

BACKTICKED = re.compile(r"`(till [^`]+)`")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]+$")
LONG_ID = re.compile(r"\b[0-9a-f]{64}\b")  # a snapshot's whole ID: people read 12
# A refusal the printed command may meet: anything public but these (a hint that leads to them
# is a broken hint). not_found is code -32061, whatever its dotted name.
BROKEN = {"usage", "internal", "workspace.not_attached", "confirmation_required"}
NOT_FOUND = -32061
# Commands printed with a placeholder because the value is nobody's to know but the reader's:
# each must still parse (as a template); anything else with a placeholder is a broken hint.
TEMPLATES = {
    "till remote add URL": "where the remote lives is the person's choice",
    "till session log SESSION": "a commit ID that matches no session names no session",
}


@dataclass
class Said:
    """What a person read after one command, and the folder they are in."""

    text: str
    cwd: Path


def commands_in(text: str) -> list[str]:
    """Every `till …` command the text tells a person to run, in order."""
    found: list[str] = []
    for line in text.splitlines():
        alone = line.strip()
        if alone.startswith("till ") and "`" not in alone:
            found.append(alone)
        found += BACKTICKED.findall(line)
    return found


def human(till: Till, *args: str, cwd: Path | None = None) -> Said:
    run = till(*args, cwd=cwd)
    assert run.code != 2 or not args, (args, run.stderr)
    return Said(run.stdout + run.stderr, cwd or till.cwd)


def _json_run(till: Till, command: str, cwd: Path) -> Run:
    words = shlex.split(command)
    assert words[0] == "till"
    return till(
        "--json",
        *[str(Path(w).expanduser()) if w.startswith("~") else w for w in words[1:]],
        cwd=cwd,
    )


def _parses(words: list[str]) -> None:
    from tillage.hosts.cli.parser import build_parser
    from tillage.verbs.registry import verb_for_command

    two = " ".join(words[1:3])
    verb = verb_for_command(two) or verb_for_command(words[1])
    assert verb is not None, words
    build_parser(verb).parse_args(words[1:])


def check_hints(till: Till, said: list[Said]) -> list[str]:
    """Runs every command `said` holds, in order; returns them."""
    from tillage.verbs.registry import COMMANDS

    ran: list[str] = []
    for one in said:
        for command in commands_in(one.text):
            words = shlex.split(command)
            where = " ".join(words[1:3])
            known = where if where in COMMANDS else words[1]
            assert known in COMMANDS, f"`{command}` names no command"
            if command in TEMPLATES:
                _parses(words)
                ran.append(command)
                continue
            holes = [w for w in words[1:] if PLACEHOLDER.match(w)]
            assert not holes, f"`{command}` has placeholders {holes} in: {one.text!r}"
            assert not LONG_ID.search(command), f"`{command}` prints a long ID"
            run = _json_run(till, command, one.cwd)
            assert run.code in (0, 1, 3), (command, run.code, run.stdout, run.stderr)
            if run.code == 1:
                error = run.error
                assert error["name"] not in BROKEN, (command, error)
                assert error["code"] != NOT_FOUND, (command, error)
            ran.append(command)
    return ran


# -- the scenes --------------------------------------------------------------------------------


def _attach(till: Till, folder: Path) -> str:
    (folder / "a.txt").write_text("one\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "b.txt").write_text("two\n")
    till.json("snap")
    return str(first)


def scene_cat_of_a_missing_path(till: Till, folder: Path, tmp: Path) -> list[Said]:
    first = _attach(till, folder)
    return [human(till, "cat", first, "nope.txt")]


def scene_a_plain_forget(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    return [human(till, "forget")]


def scene_a_purge_without_yes(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    return [human(till, "forget", "--purge")]


def scene_a_fork_rm_without_yes(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    till.json("fork", "f1")
    return [human(till, "fork-rm", "f1")]


def scene_a_gc_without_yes(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    return [human(till, "gc")]


def scene_a_rewind_without_yes(till: Till, folder: Path, tmp: Path) -> list[Said]:
    first = _attach(till, folder)
    return [human(till, "rewind", first)]


def scene_a_rewind_dry_run(till: Till, folder: Path, tmp: Path) -> list[Said]:
    first = _attach(till, folder)
    return [human(till, "rewind", first, "--dry-run")]


def scene_a_rewind_of_a_path_the_snapshot_lacks(till: Till, folder: Path, tmp: Path) -> list[Said]:
    first = _attach(till, folder)
    return [human(till, "rewind", first, "--paths", "nope.txt", "--yes")]


def _fork_with_change(till: Till, folder: Path) -> Path:
    _attach(till, folder)
    path = Path(till.json("fork", "f1")["fork"]["path"])
    (path / "c.txt").write_text("from the fork\n")
    return path


def scene_a_merge_whose_check_fails(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _fork_with_change(till, folder)
    return [human(till, "merge", "f1", "--check", "false")]


def scene_a_merge_of_a_stale_preview(till: Till, folder: Path, tmp: Path) -> list[Said]:
    path = _fork_with_change(till, folder)
    digest = till.json("merge", "f1", "--dry-run")["preview_digest"]
    (path / "c.txt").write_text("changed again\n")
    return [human(till, "merge", "f1", "--expect", digest, "--check", "true")]


def scene_a_fork_whose_folder_is_gone(till: Till, folder: Path, tmp: Path) -> list[Said]:
    path = _fork_with_change(till, folder)
    shutil.rmtree(path)
    return [human(till, "run", "f1", "--", "true")]


def scene_a_remote_just_added(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    return [human(till, "remote", "add", str(tmp / "remote"))]


def scene_a_clone_of_a_ref_never_pushed(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    key = till.json("remote", "add", str(tmp / "remote"))["key"]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    run = till("clone", str(tmp / "remote"), "copy", "--key", key, cwd=elsewhere)
    assert run.code == 1, run.stderr
    return [Said(run.stderr, folder)]  # "there": the machine that has the timeline


def scene_a_pull_of_a_ref_never_pushed(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    till.json("remote", "add", str(tmp / "remote"))
    return [human(till, "sync", "--pull")]


def scene_a_pull_that_diverged(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    key = till.json("remote", "add", str(tmp / "remote"))["key"]
    till.json("sync", "--push")
    other = Till(tmp / "home-b", till.user_home, tmp)
    other.json("clone", str(tmp / "remote"), "b", "--key", key)
    (folder / "a.txt").write_text("one, from a\n")
    till.json("sync", "--push")
    copy = tmp / "b"
    (copy / "b.txt").write_text("two, from b\n")
    run = other("sync", "--pull", cwd=copy)
    assert run.code == 3, (run.stdout, run.stderr)
    scene_a_pull_that_diverged.other = other  # type: ignore[attr-defined]
    return [Said(run.stdout + run.stderr, copy)]


def scene_a_first_pull_into_a_folder_of_its_own(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    key = till.json("remote", "add", str(tmp / "remote"))["key"]
    till.json("sync", "--push")
    other = Till(tmp / "home-c", till.user_home, tmp)
    mine = tmp / "c"
    mine.mkdir()
    (mine / "mine.txt").write_text("its own work\n")
    other.json("watch", "--no-daemon", cwd=mine)
    other.json("remote", "add", str(tmp / "remote"), "--key", key, cwd=mine)
    run = other("sync", "--pull", cwd=mine)
    assert run.code == 3, (run.stdout, run.stderr)
    scene_a_first_pull_into_a_folder_of_its_own.other = other  # type: ignore[attr-defined]
    return [Said(run.stdout + run.stderr, mine)]


def scene_a_mistyped_command(till: Till, folder: Path, tmp: Path) -> list[Said]:
    _attach(till, folder)
    run = till("statsu")
    assert run.code == 2
    return [Said(run.stderr, folder)]


def scene_a_folder_never_attached(till: Till, folder: Path, tmp: Path) -> list[Said]:
    return [human(till, "status"), human(till, "timeline")]


# The pages of a workspace with a fork that changed something, one command each.
TOUR = (
    ("status",),
    ("timeline",),
    ("show", "{first}"),
    ("diff", "{first}"),
    ("snap", "-m", "now"),
    ("forks",),
    ("fork-rm", "f1", "--dry-run"),
    ("merge", "f1", "--dry-run"),
    ("merge", "f1"),
    ("rewind", "{first}", "--yes"),
    ("gc", "--dry-run"),
    ("verify",),
    ("estimate",),
    ("radar",),
    ("claim", "src/*", "--owner", "me"),
    ("sessions",),
    ("session", "start", "s1"),
    ("budget",),
    ("retention",),
    ("try", "--", "true"),
    ("exec", "-n", "2", "--", "true"),
    ("run", "f1", "--", "true"),
    ("show", "ffffff"),
    ("pin", "{first}"),
    ("events", "--limit", "3"),
    ("remote", "list"),
    ("merge", "nope"),
    ("fork-rm", "nope", "--yes"),
    ("fork-rm", "f1", "--yes"),
    ("show", "0"),
    ("sync", "--push"),
    ("session", "revert", "{first}"),
    ("session", "log", "nope"),
    ("watch-fork", "f1", "--once"),
    ("cat", "{first}", "a.txt"),
    ("diff", "f1"),
    ("bisect", "--", "false"),
    ("op", "log"),
    ("undo",),
    ("ls", "head"),
)


def _tour(args: tuple[str, ...]) -> Callable[[Till, Path, Path], list[Said]]:
    def scene(till: Till, folder: Path, tmp: Path) -> list[Said]:
        first = _attach(till, folder)
        fork = Path(till.json("fork", "f1")["fork"]["path"])
        (fork / "c.txt").write_text("from the fork\n")
        return [human(till, *(a.format(first=first[:12]) for a in args))]

    return scene


SCENES: dict[str, Callable[[Till, Path, Path], list[Said]]] = {
    name.removeprefix("scene_"): fn
    for name, fn in dict(globals()).items()
    if name.startswith("scene_") and callable(fn)
}
SCENES.update({"page of " + " ".join(args): _tour(args) for args in TOUR})


@pytest.mark.parametrize("name", sorted(SCENES))
def test_every_command_a_page_or_error_prints_runs(
    name: str, till: Till, folder: Path, tmp_path: Path
) -> None:
    said = SCENES[name](till, folder, tmp_path)
    runner = getattr(SCENES[name], "other", till)
    try:
        ran = check_hints(runner, said)
    finally:  # a printed `till watch` started a watcher: it ends with the test
        for where in {one.cwd for one in said}:
            runner("watch", "--stop", cwd=where)
    if not name.startswith("page of "):  # a page may rightly end without a next step
        assert ran, f"the scene printed no command to run: {[s.text for s in said]}"


# -- the hints the issue names, each as a person meets it --------------------------------------


def test_the_purge_a_plain_forget_offers_drops_the_timeline_it_kept(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    note = till("forget").stdout
    assert "`till forget --purge --yes`" in note
    purged = till.json("forget", "--purge", "--yes")
    assert purged["purged"] is True and purged["snapshots"] == 2
    again = till.json("watch", "--no-daemon")  # a fresh start: nothing of the old timeline
    assert till.json("timeline")["snapshots"] == [again["head"]]


def test_a_purge_of_a_folder_never_attached_is_still_not_attached(till: Till, folder: Path) -> None:
    run = till("--json", "forget", "--purge", "--yes")
    assert run.code == 1 and run.error["name"] == "workspace.not_attached"


def test_confirmation_names_the_command_as_given_and_its_dry_run(till: Till, folder: Path) -> None:
    first = _attach(till, folder)
    till.json("fork", "f1")
    fork_rm = till("--json", "fork-rm", "f1").error["next"]
    assert "`till fork-rm f1 --dry-run`" in fork_rm and "`till fork-rm f1 --yes`" in fork_rm
    assert "explicit ID" not in fork_rm
    gc = till("--json", "gc").error["next"]
    assert "`till gc --dry-run`" in gc and "`till gc --yes`" in gc
    forget = till("--json", "forget", "--purge").error["next"]
    assert forget == "to go ahead, run `till forget --purge --yes`"  # forget has no dry run
    rewind = till("--json", "rewind", first).error["next"]
    assert f"`till rewind {first[:12]} --yes`" in rewind


def test_a_declined_prompt_after_its_preview_offers_only_the_command_with_yes() -> None:
    from tillage.verbs.invoke import _confirm_step
    from tillage.verbs.registry import verb_for_command
    from tillage.verbs.rewind import RewindRequest

    verb = verb_for_command("rewind")
    assert verb is not None
    req = RewindRequest(id="a" * 64)
    said = _confirm_step(verb.contract, req, previewed=True)
    assert said == "to go ahead, run `till rewind aaaaaaaaaaaa --yes`"


def test_cat_of_a_missing_path_points_at_the_listing_of_that_snapshot(
    till: Till, folder: Path
) -> None:
    first = _attach(till, folder)
    error = till("--json", "cat", first, "nope.txt").error
    assert f"`till ls {first[:12]}`" in error["next"] and "till diff" not in error["next"]


def test_a_missing_fork_folder_names_the_fork(till: Till, folder: Path) -> None:
    path = _fork_with_change(till, folder)
    shutil.rmtree(path)
    error = till("--json", "run", "f1", "--", "true").error
    assert error["name"] == "fork.folder_missing"
    assert "`till fork-rm f1 --yes`" in error["next"] and "NAME" not in error["next"]


def test_a_stale_merge_preview_is_retried_with_its_check(till: Till, folder: Path) -> None:
    path = _fork_with_change(till, folder)
    digest = till.json("merge", "f1", "--dry-run")["preview_digest"]
    (path / "c.txt").write_text("changed again\n")
    error = till("--json", "merge", "f1", "--expect", digest, "--check", "make test").error
    assert error["name"] == "merge.stale_preview"
    assert "`till merge f1 --check 'make test' --dry-run`" in error["next"]


def test_remote_add_says_to_push_before_the_clone_and_names_a_clone_folder(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    _attach(till, folder)
    remote = tmp_path / "project"  # the remote's last segment is the workspace's name
    page = till("remote", "add", str(remote)).stdout
    commands = commands_in(page)
    assert commands[0] == "till sync --push", commands
    assert commands[1].startswith(f"till clone {remote} project-clone --key-file "), commands


def test_a_diverged_pull_is_landed_by_the_short_command_it_prints(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    said = scene_a_pull_that_diverged(till, folder, tmp_path)
    other: Till = scene_a_pull_that_diverged.other  # type: ignore[attr-defined]
    commands = commands_in(said[0].text)
    merges = [c for c in commands if c.startswith("till merge --snapshot")]
    assert merges and not LONG_ID.search(merges[0]), commands
    landed = _json_run(other, merges[0], said[0].cwd)
    assert landed.code == 0 and landed.doc["landed"] is True, landed.stdout
    assert (said[0].cwd / "a.txt").read_text() == "one, from a\n"
    assert (said[0].cwd / "b.txt").read_text() == "two, from b\n"


def test_the_internal_error_line_says_how_to_report_it(
    till: Till, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tillage.hosts.cli import main

    def broken(*_args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(main, "_execute", broken)
    run = till("version")
    assert run.code == 1
    line = run.stderr.strip()
    assert "internal error: RuntimeError: boom" in line
    assert "--debug" in line and "till version" in line and "0." in line
    doc = json.loads(till("--json", "version").stdout)
    assert "--debug" in doc["error"]["next"]


def test_a_clone_run_beside_a_folder_remote_is_refused_as_the_remote_itself(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    _attach(till, folder)
    key = till.json("remote", "add", str(tmp_path / "remote"))["key"]
    till.json("sync", "--push")
    before = sorted(str(p) for p in (tmp_path / "remote").rglob("*"))
    run = till("--json", "clone", str(tmp_path / "remote"), "--key", key, cwd=tmp_path)
    assert sorted(str(p) for p in (tmp_path / "remote").rglob("*")) == before
    assert run.code == 1 and run.error["name"] == "invalid_argument"
    assert "the remote's own folder" in run.error["message"]
    assert "`remote-clone`" in run.error["next"]
    made = till.json("clone", str(tmp_path / "remote"), "remote-clone", "--key", key, cwd=tmp_path)
    assert made["workspace"] == str(tmp_path / "remote-clone")


def test_an_error_line_for_people_cuts_whole_ids_in_its_commands_only() -> None:
    from tillage.hosts.cli.main import short_ids

    whole = "a" * 64
    said = f"snapshot {whole} was kept: undo with `till rewind {whole} --yes`"
    assert short_ids(said) == f"snapshot {whole} was kept: undo with `till rewind {'a' * 12} --yes`"
    assert short_ids("no command here") == "no command here"


def test_confirmation_of_a_named_target_previews_it_to_name_the_snapshot(
    till: Till, folder: Path
) -> None:
    first = _attach(till, folder)
    said = till("--json", "rewind", "head~1").error["next"]
    assert said == (
        "preview with `till rewind head~1 --dry-run`: it ends with the exact command that "
        "applies it"
    )
    page = till("rewind", "head~1", "--dry-run").stdout
    assert page.splitlines()[-1].strip() == f"till rewind {first[:12]} --yes"
