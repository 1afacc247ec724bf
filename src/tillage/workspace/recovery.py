"""Finishing what the last process did not: the one place pending work is finished.

An intent record in the store names an interrupted landing (a rewind, a merge, a pull or a
revert, which land as rewinds); it is rolled forward by the journal under the workspace lock,
so a landing still running in another process is waited for, never raced (INV-7).
`open_workspace` is what a command that works in a workspace calls: the lookup (attach.py,
which finishes nothing) and then the finish.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tillage.errors import BusyError
from tillage.store.errors import ControlFileDamagedError
from tillage.store.store import Store
from tillage.workspace.attach import Workspace, require_workspace
from tillage.workspace.journal.intents import intent_path, read_intent, remove_intent
from tillage.workspace.locks import workspace_lock
from tillage.workspace.scratch import remove_orphan_images, sweep_scratch


def open_workspace(
    home: Path,
    folder: Path,
    home_dir: Path | None = None,
    store: Store | None = None,
    *,
    restore_pointer: bool = True,
) -> Workspace:
    """The attached workspace holding `folder` (attach.require_workspace: its errors, its
    `store` and `restore_pointer`), with any landing a crash interrupted finished first."""
    ws = require_workspace(home, folder, home_dir, store, restore_pointer=restore_pointer)
    recover_if_interrupted(ws)
    sweep_leftovers(ws.store)
    return ws


def sweep_leftovers(store: Store) -> None:
    """Removes what killed processes left that holds a copy of a workspace's data: a merge
    check's scratch folder (`.env` included) and a seal's image of a live database. Cheap when
    there are none: one listing each of the intents and tmp folders."""
    sweep_scratch(store)
    remove_orphan_images(store.tmp_dir)


def recover_if_interrupted(ws: Workspace) -> bool:
    """Rolls an interrupted landing forward; returns whether there was one.

    A landing still running in another process holds the workspace lock: it is left to finish
    its own work (a command that changes the folder waits for the lock itself), so a `status`
    during a long rewind answers at once.
    """
    path = intent_path(ws)
    if not path.exists():
        return False
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(workspace_lock(ws, timeout=0))
        except BusyError:
            return False
        if not path.exists():
            return False  # the landing process finished just now
        # Only now: the journal's landing imports the seal, the capture and the applier, which
        # a command that finds nothing to finish (almost every call) never needs.
        from tillage.workspace.journal.landing import finish

        if not path.is_file():
            raise _damaged_intent(path, "a folder is where the file should be")
        intent = read_intent(ws)
        if intent is None:
            remove_intent(ws)  # a torn intent: it was never acted on (written atomically)
            return False
        problem = intent_problem(intent)
        if problem is not None:
            raise _damaged_intent(path, problem)
        finish(ws, intent)
    return True


def intent_problem(intent: dict[str, object]) -> str | None:
    """What makes a whole intent record one no landing wrote (None: it names what the folder
    must become: a rewind's `target` snapshot, or a merge's `tree` at its `paths`)."""
    if intent.get("paths") is not None:
        ok = isinstance(intent.get("tree"), str) and isinstance(intent["paths"], list)
    else:
        ok = isinstance(intent.get("target"), str)
    return None if ok else "it names no snapshot to land (not a record tillage wrote)"


def _damaged_intent(path: Path, problem: str) -> ControlFileDamagedError:
    return ControlFileDamagedError.of(
        path,
        f"an interrupted rewind's record: {problem}",
        next_step="run `till verify --repair` to set it aside, then, if the folder is half "
        "rewound, put it back with `till rewind UNDO --yes` (UNDO: its newest `pre_rewind` or "
        "`pre_merge` snapshot in `till timeline`)",
    )
