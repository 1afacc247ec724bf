"""An undo killed at any step (a real process, SIGKILL) is finished by the next command of any
kind: the folder ends exactly as the undo promised, the undo is recorded once, and undoing it
still goes back to the state before it (the seal it made first, not the half-landed folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.harness import STATE_A, STATE_B, assert_crashed, crash, manifest, write_state
from tests.oplog.test_undo import attached, facts, newest_op

# The undo's own steps (verbs/oplog.py), and a rewind's inside it (most undos land as one).
UNDO_FAILPOINTS = ("undo.after_intent", "undo.before_record")
# Restoring a removed fork (features/forks/restore.py).
RESTORE_FAILPOINTS = ("fork.restore.after_copy", "fork.restore.after_record")


def _undos_of(till: Till, op_id: str) -> list[dict[str, Any]]:
    return [o for o in till.json("op", "log", "-n", "1000")["operations"] if o["undoes"] == op_id]


def _intents(till: Till) -> list[str]:
    return sorted(p.name for p in (till.home / "intents").iterdir())


@pytest.mark.parametrize(
    "failpoint", (*UNDO_FAILPOINTS, "rewind.after_intent", "rewind.after_first_action")
)
def test_an_undo_of_a_rewind_killed_at_any_step_is_finished_by_the_next_command(
    till: Till, folder: Path, failpoint: str
) -> None:
    write_state(folder, STATE_A)
    target = attached(till, folder)
    write_state(folder, STATE_B)
    before = manifest(folder)
    till.json("rewind", target, "--yes")
    rewound = manifest(folder)
    op = newest_op(till)

    proc = crash(till, failpoint, "kill", "--json", "undo", op["id"], "--yes")
    assert_crashed(proc, failpoint, "kill")

    till.json("status")  # any command finishes it
    assert manifest(folder) == before
    assert not [n for n in _intents(till) if n.startswith("undo-")]
    undos = _undos_of(till, op["id"])
    assert len(undos) == 1
    # Its undo goes back to the folder as the rewind left it, not to a half-landed state.
    till.json("undo", undos[0]["id"], "--yes")
    assert manifest(folder) == rewound


@pytest.mark.parametrize("failpoint", (*UNDO_FAILPOINTS, *RESTORE_FAILPOINTS))
def test_an_undo_of_a_fork_rm_killed_at_any_step_is_finished_by_the_next_command(
    till: Till, folder: Path, failpoint: str
) -> None:
    write_state(folder, STATE_A)
    attached(till, folder)
    fork_root = Path(till.json("fork", "alpha")["fork"]["path"])
    (fork_root / "work.txt").write_text("the fork's own work\n")
    in_fork, with_fork = manifest(fork_root), facts(till)
    till.json("fork-rm", "alpha", "--yes")
    op = newest_op(till)

    proc = crash(till, failpoint, "kill", "--json", "undo", op["id"], "--yes")
    assert_crashed(proc, failpoint, "kill")

    till.json("status")
    assert manifest(fork_root) == in_fork
    assert facts(till)["forks"] == with_fork["forks"]
    assert _intents(till) == []
    assert len(_undos_of(till, op["id"])) == 1
    # No staging copy of the fork is left beside it.
    assert sorted(p.name for p in fork_root.parent.iterdir()) == ["alpha"]


def test_an_undo_of_a_pin_killed_before_its_record_is_recorded_once_by_the_next_command(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    before = facts(till)
    till.json("pin", head)
    op = newest_op(till)
    proc = crash(till, "undo.before_record", "kill", "--json", "undo", op["id"], "--yes")
    assert_crashed(proc, "undo.before_record", "kill")
    till.json("timeline")  # not an operation-log command: any command finishes it
    assert _intents(till) == []
    till.json("timeline")  # a second command finds nothing left to finish
    assert facts(till) == before
    assert len(_undos_of(till, op["id"])) == 1
