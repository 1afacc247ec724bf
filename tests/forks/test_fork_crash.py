"""A fork or a fork removal killed at any durable step leaves no half-made universe: the next
fork command finds either no fork (and no staging folder) or the whole one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import CRASH_SCRIPT, temp_leftovers
from tests.helpers import manifest

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

FORK_FAILPOINTS = (
    "fork.after_intent",
    "fork.after_copy",
    "fork.after_snapshot",
    "fork.after_record",
    "fork.after_rename",
)
# A kill at these points comes after the fork record: the fork exists and is finished.
PUBLISHED = frozenset({"fork.after_record", "fork.after_rename"})
REMOVE_FAILPOINTS = ("fork.remove.after_trash", "fork.remove.after_record")

# Found by tests/faults/test_universe_kill_campaign.py: a killed fork or fork-rm was finished
# only by the next fork command (INV-12 said so); now any next command finishes it.


def crash(till: Till, failpoint: str, *args: str, cwd: Path | None = None) -> int:
    """Runs `till ARGS` with `failpoint` armed to SIGKILL the process there."""
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, failpoint, "kill", "--json", *args],
        cwd=cwd or till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode


def leftovers(forks_dir: Path) -> list[str]:
    return sorted(p.name for p in forks_dir.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("failpoint", FORK_FAILPOINTS)
def test_a_killed_fork_leaves_no_half_made_universe(
    till: Till, project: Path, failpoint: str
) -> None:
    expected = manifest(project)
    assert crash(till, failpoint, "fork", "k") == -9
    forks_dir = project.parent / f"{project.name}.forks"

    listed = till.json("forks")["forks"]  # finishes or undoes what the kill left

    assert leftovers(forks_dir) == []
    assert not list((till.home / "intents").glob("fork-*"))
    if failpoint in PUBLISHED:
        assert [f["name"] for f in listed] == ["k"]
        assert listed[0]["missing"] is False
        assert manifest(forks_dir / "k") == expected
        status = till.json("status", cwd=forks_dir / "k")
        assert status["fork"]["name"] == "k"
    else:
        assert listed == []
        assert not (forks_dir / "k").exists()
        # The name is free: a fork made now is whole.
        doc = till.json("fork", "k")["fork"]
        assert manifest(Path(doc["path"])) == expected
    assert manifest(project) == expected


def test_a_fork_killed_before_its_record_is_cleaned_by_the_next_fork(
    till: Till, project: Path
) -> None:
    assert crash(till, "fork.after_snapshot", "fork", "k") == -9
    forks_dir = project.parent / f"{project.name}.forks"
    assert leftovers(forks_dir)  # the staging folder is there until the next fork command
    till.json("fork", "other")
    assert leftovers(forks_dir) == []


@pytest.mark.parametrize("failpoint", REMOVE_FAILPOINTS)
def test_a_killed_fork_removal_is_undone_or_finished(
    till: Till, project: Path, failpoint: str
) -> None:
    path = Path(till.json("fork", "r")["fork"]["path"])
    (path / "work.txt").write_text("work\n")
    expected = manifest(path)
    assert crash(till, failpoint, "fork-rm", "r", "--yes") == -9

    listed = till.json("forks")["forks"]

    assert leftovers(path.parent) == []
    if failpoint == "fork.remove.after_record":
        assert listed == []
        assert not path.exists()
    else:
        assert [f["name"] for f in listed] == ["r"]
        assert manifest(path) == expected
        assert till.json("fork-rm", "r", "--yes")["removed"] is True
        assert not path.exists()


def test_removing_again_a_fork_whose_removal_was_killed_after_its_record_finishes_it(
    till: Till, project: Path
) -> None:
    """The removal is recorded, its trash (the fork's files) not deleted yet: `fork-rm` of the
    name answers not_found, and still deletes that trash on its way."""
    path = Path(till.json("fork", "r")["fork"]["path"])
    assert crash(till, "fork.remove.after_record", "fork-rm", "r", "--yes") == -9
    assert leftovers(path.parent) != []

    again = till("--json", "fork-rm", "r", "--yes")

    assert again.code == 1 and again.error["name"] == "fork.not_found"
    assert leftovers(path.parent) == []


def test_a_fork_that_fails_to_copy_answers_an_error_and_leaves_nothing(
    till: Till, project: Path
) -> None:
    import errno

    from tillage.features.forks.errors import ForkCopyError
    from tillage.features.forks.fork import create_fork
    from tillage.platform import failpoints
    from tillage.workspace.attach import find_workspace

    def unreadable() -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(project / "secret"))

    ws = find_workspace(till.home, project)
    assert ws is not None
    with failpoints.armed("fork.after_copy", unreadable), pytest.raises(ForkCopyError) as err:
        create_fork(ws, "nope")
    assert err.value.code == -32162
    assert "secret" in err.value.message
    forks_dir = project.parent / f"{project.name}.forks"
    assert list(forks_dir.iterdir()) == []
    assert not list((till.home / "intents").glob("fork-*"))
    assert till.json("forks")["forks"] == []


@pytest.mark.parametrize("failpoint", ["fork.after_copy", "fork.after_record"])
def test_a_killed_fork_is_finished_by_any_next_command(
    till: Till, project: Path, failpoint: str
) -> None:
    expected = manifest(project)
    assert crash(till, failpoint, "fork", "k") == -9
    forks_dir = project.parent / f"{project.name}.forks"

    merged = till("--json", "merge", "k")  # not a fork command

    assert leftovers(forks_dir) == []  # no copy of the workspace is left hidden
    assert not list((till.home / "intents").glob("fork-*"))
    if failpoint == "fork.after_record":  # recorded: whole, and merges back as nothing
        assert merged.code == 0, merged.stdout
        assert manifest(forks_dir / "k") == expected
    else:
        assert merged.error["name"] == "fork.not_found"


@pytest.mark.parametrize("failpoint", REMOVE_FAILPOINTS)
def test_a_killed_fork_removal_is_undone_or_finished_by_any_next_command(
    till: Till, project: Path, failpoint: str
) -> None:
    path = Path(till.json("fork", "r")["fork"]["path"])
    (path / "work.txt").write_text("work\n")
    expected = manifest(path)
    assert crash(till, failpoint, "fork-rm", "r", "--yes") == -9

    merged = till("--json", "merge", "r")  # not a fork command

    assert leftovers(path.parent) == []  # nothing half-removed beside the forks
    if failpoint == "fork.remove.after_record":
        assert merged.error["name"] == "fork.not_found"
        assert not path.exists()
    else:  # the removal is undone: the fork is whole, and its work merges
        assert merged.code == 0, merged.stdout
        assert manifest(path) == expected


# Runs the command line with the reflink copier replaced by a SIGKILL: the process dies inside
# the copy's driver probe, its probe files made (argv: till-args...).
KILLED_IN_PROBE = (
    "import os, signal, sys\n"
    "from tillage.platform import clone\n"
    "clone._COPIERS['reflink'] = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_a_fork_killed_while_it_probes_how_to_copy_leaves_no_probe_file(
    till: Till, project: Path
) -> None:
    """The copy first finds its driver by copying a small file; killed there, it must leave
    that file nowhere: not in the workspace's `.tillage/`, not beside the forks."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_IN_PROBE, "--json", "fork", "k"],
        cwd=project,
        env=till.env(),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    forks_dir = project.parent / f"{project.name}.forks"

    assert till.json("forks")["forks"] == []  # finishes what the kill left

    left = [*temp_leftovers(project), *temp_leftovers(forks_dir)]
    assert left == []
    assert leftovers(forks_dir) == []


# Kills the process (or fails as a full disk would) at the Nth seal that reaches
# `seal.before_publish` (a fork seals its parent first, then the fork itself).
NTH_SEAL_KILL = """import os, signal, sys
from tillage.platform import failpoints
nth, how, hits = int(sys.argv[1]), sys.argv[2], [0]
def at_publish():
    hits[0] += 1
    if hits[0] == nth and how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if hits[0] == nth:
        raise OSError(28, "No space left on device")
failpoints.arm("seal.before_publish", at_publish)
from tillage.hosts.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("how", ["kill", "disk_full"])
@pytest.mark.parametrize("nth", [1, 2])
def test_a_fork_killed_before_a_seal_publishes_leaves_no_lost_timeline_to_keep_or_report(
    till: Till, project: Path, nth: int, how: str
) -> None:
    # A fork killed after its seal wrote a pack but before it published leaves that seal's
    # snapshot for a workspace the log never records. The next command undoes the fork and
    # drops it: `verify` stays ok (it is no lost timeline to take back) and a gc reclaims it.
    (project / "edit.txt").write_text("changed since the head\n")
    killed = subprocess.run(
        [sys.executable, "-c", NTH_SEAL_KILL, str(nth), how, "--json", "fork", "k"],
        cwd=project,
        env=till.env(),
        capture_output=True,
        check=False,
    )
    assert killed.returncode == (-9 if how == "kill" else 1), killed.stdout
    assert till.json("forks")["forks"] == []  # the next command undoes the fork
    report = till.json("verify")
    assert report["ok"] is True, report["problems"]
    till.json("gc", "--yes")
    assert till.json("verify")["ok"] is True
