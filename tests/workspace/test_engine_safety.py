"""The engine's second pass: the data-loss holes and wrong answers a hostile review found.

Each test is one of the review's repros, run through the real `till` process, asserting what a
user would see.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    STATE_A,
    STATE_B,
    assert_crashed,
    crash,
    logged_snapshots,
    manifest,
    snapshot_ids,
    temp_leftovers,
    verify_store,
    write_state,
)

# -- 1. a symlinked `.tillage` is never written through -------------------------------------


def test_a_tillage_symlink_to_the_folder_itself_is_refused_and_gitignore_is_untouched(
    till: Till, folder: Path
) -> None:
    (folder / ".gitignore").write_text("node_modules/\n")
    (folder / ".tillage").symlink_to(".")
    run = till("--json", "watch", "--no-daemon")
    assert run.code == 1
    assert run.error["name"] == "workspace.unsafe_control_dir"
    assert (folder / ".gitignore").read_text() == "node_modules/\n"
    assert not (folder / "workspace.json").exists()


def test_a_tillage_symlink_into_another_repo_never_overwrites_that_repo(
    till: Till, folder: Path, user_home: Path
) -> None:
    other = user_home / "other"
    other.mkdir()
    (other / "a.txt").write_text("other\n")
    till.json("watch", "--no-daemon", cwd=other)
    (other / ".tillage" / ".gitignore").write_text("precious\n")
    pointer = (other / ".tillage" / "workspace.json").read_bytes()
    (folder / ".tillage").symlink_to(other / ".tillage")
    for command in (["status"], ["watch", "--no-daemon"], ["snap"]):
        run = till("--json", *command)
        assert run.code == 1, command
        assert run.error["name"] == "workspace.unsafe_control_dir"
    assert (other / ".tillage" / ".gitignore").read_text() == "precious\n"
    assert (other / ".tillage" / "workspace.json").read_bytes() == pointer
    assert till.json("status", cwd=other)["workspace"] == str(other)


def test_a_tillage_that_is_a_regular_file_is_a_structured_error(till: Till, folder: Path) -> None:
    (folder / ".tillage").write_text("mine\n")
    run = till("--json", "watch", "--no-daemon")
    assert run.code == 1
    assert run.error["name"] == "workspace.unsafe_control_dir"
    assert (folder / ".tillage").read_text() == "mine\n"


# -- 2. the store is never a workspace ------------------------------------------------------


def test_the_store_folder_and_anything_inside_it_are_refused(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    for place in (till.home, till.home / "packs"):
        run = till("--json", "watch", "--no-daemon", cwd=place)
        assert run.code == 1, place
        assert run.error["name"] == "workspace.refused_root"
        assert "store" in run.error["message"]
    assert not (till.home / ".tillage").exists()
    assert verify_store(till)["ok"] is True


# -- 3. forget keeps the timeline -----------------------------------------------------------


def test_forget_keeps_the_timeline_and_a_later_attach_finds_it_again(
    till: Till, folder: Path
) -> None:
    (folder / "a").write_text("a\n")
    till.json("watch", "--no-daemon")
    (folder / "a").write_text("b\n")
    precious = till.json("snap", "-m", "precious")["snapshot"]["id"]
    forgotten = till.json("forget")
    assert forgotten["purged"] is False
    assert "stays in the store" in forgotten["note"]
    again = till.json("watch", "--no-daemon")
    assert again["resumed"] is True and "earlier timeline" in again["note"]
    assert precious in snapshot_ids(till)
    (folder / "a").write_text("c\n")
    till.json("rewind", precious, "--yes")
    assert (folder / "a").read_text() == "b\n"


def test_forget_purge_needs_yes_and_then_drops_the_timeline(till: Till, folder: Path) -> None:
    (folder / "a").write_text("a\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    refused = till("--json", "forget", "--purge")
    assert refused.code == 1 and refused.error["name"] == "confirmation_required"
    assert first in snapshot_ids(till), "nothing changed without --yes"
    assert till.json("forget", "--purge", "--yes")["purged"] is True
    again = till.json("watch", "--no-daemon")
    assert again["resumed"] is False
    assert snapshot_ids(till) == [again["head"]["id"]]


# -- 4 and 13. the policy never blocks recovery; the target's policy guards its exclusions ----


@pytest.mark.parametrize("bad", ["!", "a\\", "[z-a]"])
def test_a_bad_policy_line_is_skipped_and_reported_and_nothing_is_blocked(
    till: Till, folder: Path, bad: str
) -> None:
    (folder / "keep.txt").write_text("k\n")
    (folder / "secret.log").write_text("s\n")
    (folder / ".tillagepolicy").write_text(f"*.log\n{bad}\n")
    watched = till.json("watch", "--no-daemon")
    (problem,) = watched["policy_problems"]
    assert problem["file"] == ".tillagepolicy" and problem["line"] == 2
    assert watched["head"]["files"] == 2, "the good line still excludes secret.log"
    first = watched["head"]["id"]
    assert till.json("status")["policy_problems"] == [problem]
    (folder / "keep.txt").write_text("changed\n")
    snap = till.json("snap")
    assert snap["snapshot"]["files"] == 2
    assert snap["policy_problems"] == [problem]
    assert [c["path"] for c in till.json("diff", first)["changes"]] == ["keep.txt"]
    assert till.json("rewind", first, "--dry-run")["applied"] is False
    assert till.json("rewind", first, "--dry-run", "--paths", "keep.txt")["applied"] is False
    till.json("rewind", first, "--yes", "--paths", "keep.txt")
    assert (folder / "keep.txt").read_text() == "k\n"
    till.json("rewind", first, "--yes")
    assert (folder / "secret.log").read_text() == "s\n"


def test_a_rewind_never_touches_what_the_target_snapshots_policy_excluded(
    till: Till, folder: Path
) -> None:
    (folder / "app.py").write_text("v1\n")
    (folder / ".tillagepolicy").write_text("node_modules/\n")
    (folder / "node_modules" / "dep").mkdir(parents=True)
    (folder / "node_modules" / "dep" / "index.js").write_text("big dependency\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / ".tillagepolicy").unlink()  # the live policy is gone: node_modules is captured now
    (folder / "app.py").write_text("v2\n")
    till.json("snap")
    doc = till.json("rewind", first, "--yes")
    assert all(not c["path"].startswith("node_modules") for c in doc["changes"])
    assert (folder / "node_modules" / "dep" / "index.js").read_text() == "big dependency\n"
    assert (folder / "app.py").read_text() == "v1\n"
    assert (folder / ".tillagepolicy").read_text() == "node_modules/\n"


# -- 6. an interrupted rewind is finished by the next command, whatever it is ----------------


@pytest.mark.parametrize("next_command", [["watch", "--no-daemon"], ["verify"], ["status"]])
def test_any_next_command_finishes_a_rewind_killed_mid_apply(
    till: Till, folder: Path, next_command: list[str]
) -> None:
    write_state(folder, STATE_A)
    target = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_B)
    proc = crash(till, "rewind.after_first_action", "kill", "--json", "rewind", first, "--yes")
    assert_crashed(proc, "rewind.after_first_action", "kill")
    before = set(logged_snapshots(till.home))  # read without a command that would recover
    run = till("--json", *next_command)
    assert run.code == 0, (run.stdout, run.stderr)
    assert manifest(folder) == target
    assert temp_leftovers(folder) == []
    if next_command[0] == "verify":
        assert run.doc["finished_rewinds"] == [str(folder)]
    if next_command[0] == "watch":
        # The snapshot it sealed is of the finished folder, not of the half-rewound one.
        head = run.doc["head"]["id"]
        assert head not in before
        till.json("rewind", head, "--dry-run")
        assert till.json("diff", first)["changes"] == []


# -- 7. a read-only store still answers reading commands ------------------------------------


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a store folder, a read-only bind mount of it), unmounted afterwards."""
    source, view = tmp_path / "rw-store", tmp_path / "ro-store"
    source.mkdir()
    view.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    mounted = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        remount = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(view)], capture_output=True, check=False
        )
        if remount.returncode != 0:
            pytest.skip(f"cannot make a read-only mount: {remount.stderr.decode().strip()}")
        yield source, view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_a_read_only_store_answers_reads_and_refuses_writes_clearly(
    read_only_view: tuple[Path, Path], user_home: Path, folder: Path
) -> None:
    source, view = read_only_view
    writable = Till(source, user_home, folder)
    (folder / "a.txt").write_text("v1\n")
    first = writable.json("watch", "--no-daemon")["head"]["id"]
    (folder / "a.txt").write_text("v2\n")
    writable.json("snap", "-m", "second")
    ro = Till(view, user_home, folder)
    assert [s["label"] for s in ro.json("timeline")["snapshots"]] == ["second", None]
    assert base64.b64decode(ro.json("cat", first, "a.txt")["content_base64"]) == b"v1\n"
    assert ro.json("status")["snapshots"] == 2
    assert [c["path"] for c in ro.json("diff", first)["changes"]] == ["a.txt"]
    for command in (["snap"], ["rewind", first, "--yes"]):
        run = ro("--json", *command)
        assert run.code == 1, command
        assert run.error["name"] == "store.read_only", run.error
    assert (folder / "a.txt").read_text() == "v2\n", "a refused rewind changed nothing"


# -- 8. Ctrl-C and SIGTERM print the envelope and leave nothing half-done --------------------

SIGNAL_SCRIPT = (
    "import os, signal, sys\n"
    "from tillage.platform import failpoints\n"
    "sig = getattr(signal, sys.argv[2])\n"
    "failpoints.arm(sys.argv[1], lambda: os.kill(os.getpid(), sig))\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)


@pytest.mark.process
@pytest.mark.parametrize(
    ("failpoint", "sig", "status"),
    [
        ("rewind.after_first_action", "SIGINT", 130),
        ("rewind.after_staging", "SIGINT", 130),
        ("rewind.after_first_action", "SIGTERM", 143),
    ],
)
def test_an_interrupted_rewind_prints_the_envelope_and_the_next_command_finishes_it(
    till: Till, folder: Path, failpoint: str, sig: str, status: int
) -> None:
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_B)
    state_b = manifest(folder)
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_SCRIPT, failpoint, sig, "--json", "rewind", first, "--yes"],
        cwd=folder,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "interrupted"
    till.json("status")  # the contract: the next command finishes whatever was left
    assert manifest(folder) in (state_a, state_b)
    if failpoint == "rewind.after_first_action":
        assert manifest(folder) == state_a, "the next command finished the rewind"
    assert temp_leftovers(folder) == []
    assert verify_store(till)["ok"] is True


# -- 9, 10. repeated --paths; cat of a symlink; cat streams ------------------------------------


def test_repeated_paths_flags_are_combined(till: Till, folder: Path) -> None:
    for name in ("a", "b", "d"):
        (folder / name).write_text(f"{name}1\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    for name in ("a", "b", "d"):
        (folder / name).write_text(f"{name}2\n")
    plan = till.json("rewind", first, "--dry-run", "--paths", "d", "--paths", "a")
    assert sorted(c["path"] for c in plan["changes"]) == ["a", "d"]
    till.json("rewind", first, "--yes", "--paths", "d", "--paths", "a")
    assert [(folder / n).read_text() for n in ("a", "b", "d")] == ["a1\n", "b2\n", "d1\n"]


def test_cat_of_a_symlink_says_it_is_a_link_instead_of_printing_its_target(
    till: Till, folder: Path
) -> None:
    (folder / "README.md").write_text("readme\n")
    (folder / "link").symlink_to("README.md")
    head = till.json("watch", "--no-daemon")["head"]["id"]
    run = till("--json", "cat", head, "link")
    assert run.code == 1
    assert run.error["name"] == "snapshot.not_a_file"
    assert run.error["details"] == {"kind": "symlink", "target": "README.md"}
    human = till("cat", head, "link")
    assert human.code == 1 and human.stdout == ""
    assert "symlink to 'README.md'" in human.stderr


# Runs a command and reports its peak RSS on stderr. It is a fresh, small process: a child's
# ru_maxrss starts from its parent's high-water mark at fork, so forking `till` straight from
# pytest (grown by earlier tests) would report pytest's size, not till's.
MEASURE = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[1:])\n"
    "_pid, status, usage = os.wait4(proc.pid, 0)\n"
    "sys.stderr.write(f'maxrss_kib={usage.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _peak_rss_mib(till: Till, *args: str) -> tuple[float, int, bytes]:
    """Runs `till ARGS`, returning its peak RSS in MiB, how many bytes it printed and the
    first of them."""
    with subprocess.Popen(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "tillage", *args],
        cwd=till.cwd,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out = bytearray()
        size = 0
        while chunk := proc.stdout.read(1 << 20):
            size += len(chunk)
            if len(out) < 64:
                out += chunk[:64]
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0, err
    (kib,) = [int(line.split("=")[1]) for line in err.splitlines() if line.startswith("maxrss")]
    return kib / 1024, size, bytes(out)


@pytest.mark.process
@pytest.mark.slow
def test_cat_streams_a_large_file_in_bounded_memory(till: Till, folder: Path) -> None:
    size = 256 << 20  # holding it whole would take 256 MiB, its base64 342 MiB
    block = os.urandom(1 << 20)
    with open(folder / "big.bin", "wb") as f:
        for i in range(size >> 20):
            f.write(block[i:] + block[:i])
    head = till.json("watch", "--no-daemon")["head"]["id"]
    rss, printed, start = _peak_rss_mib(till, "cat", head, "big.bin")
    assert printed == size and start == block[:64]
    assert rss < 150, f"`till cat` of a 256 MiB file peaked at {rss:.0f} MiB"
    rss, printed, start = _peak_rss_mib(till, "--json", "cat", head, "big.bin")
    assert start.startswith(b'{"path":"big.bin","size":268435456,"content_base64":"')
    assert printed > size * 4 // 3
    assert rss < 150, f"`till --json cat` of a 256 MiB file peaked at {rss:.0f} MiB"


# -- 12. errors that say what is really wrong -------------------------------------------------


def test_status_in_the_root_folder_does_not_advise_attaching_it(till: Till) -> None:
    run = till("--json", "--repo", "/", "status")
    assert run.code == 1 and run.error["name"] == "workspace.not_attached"
    assert "run `till watch` in /" not in run.error["next"]
    assert "project folder" in run.error["next"]


@pytest.mark.process
def test_a_deleted_current_folder_is_said_to_be_missing(till: Till, folder: Path) -> None:
    gone = folder / "gone"
    gone.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys, runpy; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
            "sys.argv = ['till', '--json', 'status']; "
            "runpy.run_module('tillage', run_name='__main__')",
            str(gone),
        ],
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "workspace.folder_missing"


def test_an_enormous_argument_is_not_echoed_back_whole(till: Till, folder: Path) -> None:
    (folder / "a").write_text("a")
    till.json("watch", "--no-daemon")
    huge = "a" * 100_000
    for args in (["rewind", huge, "--yes"], ["cat", huge, "a"], ["show", huge]):
        run = till("--json", *args)
        assert run.code == 1
        assert len(run.stdout) < 2000, args
        assert "100000 characters" in run.error["message"]


def test_the_agent_guide_lists_the_usage_and_interrupted_codes() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "agents.md").read_text()
    assert "| -32070 | `usage` |" in guide
    assert "| -32071 | `interrupted` |" in guide


# -- a copied or moved folder ----------------------------------------------------------------


def test_a_copy_of_a_workspace_is_not_mistaken_for_it(
    till: Till, folder: Path, user_home: Path
) -> None:
    (folder / "a.txt").write_text("original\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    copy = user_home / "copy"
    subprocess.run(["cp", "-a", str(folder), str(copy)], check=True)
    run = till("--json", "status", cwd=copy)
    assert run.code == 1 and run.error["name"] == "workspace.not_attached"
    attached = till.json("watch", "--no-daemon", cwd=copy)
    assert attached["workspace"] == str(copy) and attached["attached_now"] is True
    assert first not in [s["id"] for s in till.json("timeline", cwd=copy)["snapshots"]]
    assert till.json("status")["workspace"] == str(folder)
    assert first in snapshot_ids(till)


def test_a_moved_workspace_keeps_its_timeline(till: Till, folder: Path, user_home: Path) -> None:
    (folder / "a.txt").write_text("v1\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    moved = user_home / "renamed"
    folder.rename(moved)
    status = till.json("status", cwd=moved)
    assert status["workspace"] == str(moved)
    assert status["head"]["id"] == first
    (moved / "a.txt").write_text("v2\n")
    till.json("rewind", first, "--yes", cwd=moved)
    assert (moved / "a.txt").read_text() == "v1\n"


def test_verify_removes_temporary_files_killed_writers_left_in_the_store(
    till: Till, folder: Path
) -> None:
    (folder / "a").write_text("a")
    till.json("watch", "--no-daemon")
    intents = till.home / "intents"
    stale = intents / ".rewind-x.json.tillage-tmp-1a2b"
    fresh = intents / ".rewind-y.json.tillage-tmp-3c4d"
    stale.write_text("{")
    fresh.write_text("{")
    os.utime(stale, (0, 0))
    assert verify_store(till)["ok"] is True
    assert not stale.exists(), "a temporary file older than any live write is removed"
    assert fresh.exists(), "a fresh one may be a live process's intent about to be renamed"


@pytest.mark.process
def test_cat_into_a_reader_that_stops_early_ends_quietly(till: Till, folder: Path) -> None:
    (folder / "big.bin").write_bytes(os.urandom(8 << 20))
    head = till.json("watch", "--no-daemon")["head"]["id"]
    for json_flag in ([], ["--json"]):
        with subprocess.Popen(
            [sys.executable, "-m", "tillage", *json_flag, "cat", head, "big.bin"],
            cwd=folder,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.read(100)
            proc.stdout.close()  # like `| head -c 100`
            err = proc.stderr.read().decode()
            assert proc.wait(timeout=60) == 141
        assert "Traceback" not in err and "BrokenPipe" not in err, err
