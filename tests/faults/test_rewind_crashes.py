"""A rewind killed at every step (INV-7): the next command finishes it, and nothing is lost."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    REWIND_FAILPOINTS,
    STATE_A,
    STATE_B,
    STATE_C,
    TMP_MARK,
    Manifest,
    assert_crashed,
    crash,
    logged_snapshots,
    manifest,
    rewind,
    temp_leftovers,
    write_state,
)


def _intents(till: Till) -> list[str]:
    return sorted(p.name for p in (till.home / "intents").iterdir())


@dataclass(frozen=True)
class KilledRewind:
    """A workspace sealed in STATE_A, wrecked to STATE_B, and a rewind to A killed at a step."""

    target: str
    state_a: Manifest
    wrecked: Manifest


def _kill_a_rewind(till: Till, folder: Path, failpoint: str) -> KilledRewind:
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    target = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_B)
    wrecked = manifest(folder)
    proc = crash(till, failpoint, "kill", "--json", "rewind", target, "--yes")
    assert_crashed(proc, failpoint, "kill")
    return KilledRewind(target, state_a, wrecked)


@pytest.mark.parametrize("failpoint", REWIND_FAILPOINTS)
def test_a_rewind_killed_at_any_step_is_finished_by_the_next_command(
    till: Till, folder: Path, failpoint: str
) -> None:
    killed = _kill_a_rewind(till, folder, failpoint)
    state_a = killed.state_a
    wrecked = killed.wrecked
    assert len(_intents(till)) == 1
    # What a kill in the middle of writing a file leaves behind.
    stray = folder / "src" / f".app.py{TMP_MARK}0123456789ab"
    if stray.parent.is_dir():
        stray.write_bytes(b"half a file")

    status = till.json("status")
    assert manifest(folder) == state_a
    assert temp_leftovers(folder) == []
    assert _intents(till) == []

    timeline = till.json("timeline")["snapshots"]
    # The interrupted rewind's own undo, and the seal taken before finishing it.
    undo = [s for s in timeline if (s["label"] or "").startswith("before rewind to")]
    assert len(undo) == 1
    finishing = [s for s in timeline if (s["label"] or "").startswith("before finishing")]
    assert len(finishing) == 1 and status["head"]["id"] == finishing[0]["id"]
    rewind(till, undo[0]["id"])
    assert manifest(folder) == wrecked


def test_a_rewind_killed_while_staging_leaves_the_folder_as_it_was(
    till: Till, folder: Path
) -> None:
    killed = _kill_a_rewind(till, folder, "rewind.after_staging")
    state_a = killed.state_a
    wrecked = killed.wrecked
    target = killed.target
    assert _intents(till) == []
    till.json("status")
    assert manifest(folder) == wrecked
    rewind(till, target)
    assert manifest(folder) == state_a
    assert not list((folder / ".tillage").glob("staging-*"))


def test_a_file_written_after_a_rewind_was_killed_is_not_overwritten_silently(
    till: Till, folder: Path
) -> None:
    _kill_a_rewind(till, folder, "rewind.after_intent")
    sealed_before = set(logged_snapshots(till.home))
    # Someone (an agent, an editor) writes before any tillage command runs again.
    (folder / "src" / "app.py").write_bytes(b"written after the crash\n")

    till.json("status")
    assert (folder / "src" / "app.py").read_bytes() == STATE_A["src/app.py"]
    kept = [
        sid
        for sid in logged_snapshots(till.home)
        if sid not in sealed_before
        and till("--json", "cat", sid, "src/app.py").doc.get("content_base64")
        == base64.b64encode(b"written after the crash\n").decode()
    ]
    assert kept, "the bytes written after the crash are in no snapshot"


# Runs `till` (argv[4:]); the moment a rewind has written its intent, it swaps the folder
# argv[1] for a symlink to argv[2] (a directory outside the workspace) and touches argv[3].
RACE_ARGS = ("--json", "rewind", "--yes")
RACE_SCRIPT = (
    "import os, shutil, sys\n"
    "from tillage.platform import failpoints\n"
    "real = failpoints.hit\n"
    "def hit(name):\n"
    "    if name == 'rewind.after_intent':\n"
    "        shutil.rmtree(sys.argv[1])\n"
    "        os.symlink(sys.argv[2], sys.argv[1])\n"
    "        open(sys.argv[3], 'w').close()\n"
    "    real(name)\n"
    "failpoints.hit = hit\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[4:]))\n"
)


def test_a_folder_swapped_for_a_symlink_during_a_rewind_is_never_written_through(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"outside\n")
    write_state(folder, {"sub/f.txt": b"old\n", "sub/g.txt": b"g\n", "top.txt": b"top\n"})
    target_state = manifest(folder)
    target = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, {"sub/f.txt": b"new\n", "top.txt": b"changed\n"})
    before = manifest(folder)

    swapped = tmp_path / "swapped"
    race = [str(folder / "sub"), str(outside), str(swapped)]
    proc = subprocess.run(
        [sys.executable, "-c", RACE_SCRIPT, *race, *RACE_ARGS, target],
        cwd=folder,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert swapped.exists(), "the race did not happen"
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 1), proc
    if proc.returncode == 1:
        assert json.loads(proc.stdout)["error"]["code"] == -32066
    assert manifest(outside) == {"f.txt": ("file", 0o644, b"outside\n")}

    till.json("status")
    assert manifest(outside) == {"f.txt": ("file", 0o644, b"outside\n")}
    if manifest(folder) != target_state:
        # The rewind stopped and said so (rather than being finished by the next command):
        # its undo must put the folder back as it was before the rewind.
        assert proc.returncode == 1
        undo = till.json("timeline", "--trigger", "pre_rewind")["snapshots"][0]["id"]
        rewind(till, undo)
        assert manifest(folder) == before
        assert manifest(outside) == {"f.txt": ("file", 0o644, b"outside\n")}


@pytest.mark.parametrize("failpoint", ["pack.after_write", "publish.after_log"])
def test_a_rewind_killed_while_sealing_the_present_has_not_touched_the_folder(
    till: Till, folder: Path, failpoint: str
) -> None:
    killed = _kill_a_rewind(till, folder, failpoint)
    wrecked = killed.wrecked

    assert _intents(till) == []
    status = till.json("status")
    assert manifest(folder) == wrecked
    assert status["snapshots"] == (2 if failpoint == "publish.after_log" else 1)


def test_a_recovery_killed_half_way_is_finished_by_the_command_after_it(
    till: Till, folder: Path
) -> None:
    killed = _kill_a_rewind(till, folder, "rewind.after_intent")
    state_a = killed.state_a

    # The recovering command dies too, after its first action.
    second = crash(till, "rewind.after_first_action", "kill", "--json", "status")
    assert_crashed(second, "rewind.after_first_action", "kill")
    assert len(_intents(till)) == 1

    till.json("status")
    assert manifest(folder) == state_a
    assert _intents(till) == []


def test_two_commands_racing_to_finish_an_interrupted_rewind_finish_it_once(
    till: Till, folder: Path
) -> None:
    killed = _kill_a_rewind(till, folder, "rewind.after_first_action")
    state_a = killed.state_a

    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", *args],
            cwd=folder,
            env=till.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in (("status",), ("timeline",))
    ]
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, (out, err)
    assert manifest(folder) == state_a
    assert temp_leftovers(folder) == []
    assert _intents(till) == []


def test_a_new_rewind_first_finishes_the_one_that_was_killed(till: Till, folder: Path) -> None:
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_C)
    state_c = manifest(folder)
    third = till.json("snap")["snapshot"]["id"]
    write_state(folder, STATE_B)
    proc = crash(till, "rewind.after_first_action", "kill", "--json", "rewind", first, "--yes")
    assert_crashed(proc, "rewind.after_first_action", "kill")

    doc = rewind(till, third)

    assert manifest(folder) == state_c
    # The present the second rewind sealed is the finished first rewind.
    rewind(till, doc["undo"])
    assert manifest(folder) == state_a
