"""Every failpoint the code marks is crashed at by some fault test."""

from __future__ import annotations

import ast
from pathlib import Path

import tillage
from tests.faults.harness import GC_FAILPOINTS, REWIND_FAILPOINTS, SEAL_FAILPOINTS
from tests.faults.test_pack_rotation_crashes import ROTATION_FAILPOINTS
from tests.forks.test_fork_crash import FORK_FAILPOINTS, REMOVE_FAILPOINTS
from tests.merge.test_merge import MERGE_FAILPOINTS
from tests.oplog.test_undo_crashes import RESTORE_FAILPOINTS, UNDO_FAILPOINTS
from tests.sync.test_clone import CLONE_FAILPOINTS
from tests.sync.test_sync_faults import PULL_FAILPOINTS


def _marked_failpoints() -> set[str]:
    names: set[str] = set()
    for path in Path(tillage.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "hit"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "failpoints"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
    return names


def test_every_failpoint_in_the_code_is_exercised_by_a_fault_test() -> None:
    marked = _marked_failpoints()
    assert marked, "no failpoints found: has the marking changed?"
    # rewind.after_staging comes before the intent: it has its own test, in which the folder
    # is left as it was rather than finished.
    # A fork's and a fork removal's are crashed at in tests/forks/test_fork_crash.py, a
    # gc's in tests/faults/test_gc_crashes.py.
    covered = set(SEAL_FAILPOINTS) | set(REWIND_FAILPOINTS) | {"rewind.after_staging"}
    covered |= set(GC_FAILPOINTS)
    covered |= set(ROTATION_FAILPOINTS)  # tests/faults/test_pack_rotation_crashes.py
    covered |= set(FORK_FAILPOINTS) | set(REMOVE_FAILPOINTS) | set(MERGE_FAILPOINTS)
    covered |= set(CLONE_FAILPOINTS)  # tests/sync/test_clone.py
    covered |= set(PULL_FAILPOINTS)  # tests/sync/test_sync_faults.py
    covered |= set(UNDO_FAILPOINTS) | set(RESTORE_FAILPOINTS)  # tests/oplog/test_undo_crashes.py
    assert marked <= covered
