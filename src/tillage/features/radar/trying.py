"""`till try`: seal, run a command in the workspace, seal again, so the attempt can be undone.

The command runs in the caller's folder (inside the workspace), with no lock held: a watcher
keeps sealing meanwhile, and the command may itself call `till`. Its result is sealed whether it
succeeded or not (a failed attempt is exactly what one wants to rewind), and an interrupted one
(Ctrl-C, SIGTERM) is sealed too before the interruption goes on, noting both snapshots on it
(errors.note_interruption) so that the `interrupted` answer says how to undo the attempt.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from tillage.errors import note_interruption
from tillage.platform.commands import argv_of, run_command
from tillage.platform.launch import Launch
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.core.progress import ProgressFn

LABEL_LIMIT = 200


@dataclass(frozen=True)
class Tried:
    """An attempt: the state before it, the state after it, and how the command ended."""

    before: SnapshotRow
    after: SnapshotRow
    exit_code: int
    output: str


def undo_command(before: str) -> str:
    """The command that puts the folder back as it was before an attempt (sealed `before`)."""
    return f"till rewind {before} --yes"


def default_label(command: tuple[str, ...]) -> str:
    """`try: make test`, cut to LABEL_LIMIT characters: what the timeline shows."""
    text = "try: " + " ".join(command)
    return text if len(text) <= LABEL_LIMIT else text[: LABEL_LIMIT - 1] + "…"


def _cwd(ws: Workspace, folder: Path) -> Path:
    """The caller's folder when it lies in the workspace, else the workspace's root."""
    try:
        folder.resolve().relative_to(ws.root.resolve())
    except (OSError, ValueError):
        return ws.root
    return folder if folder.is_dir() else ws.root


def try_command(
    ws: Workspace,
    command: tuple[str, ...],
    *,
    folder: Path,
    label: str | None = None,
    agent: str | None = None,
    launch: Launch | None = None,
    on_progress: ProgressFn | None = None,
) -> Tried:
    """Seals (trigger `try_before`), runs `command` in `folder` (its output live to
    `launch`, captured either way), seals again (`try_after`) and returns both states."""
    from tillage.workspace.seal import SealOptions, seal

    argv_of(command)  # an empty command is refused before anything is sealed
    text = label if label is not None else default_label(command)
    before = seal(
        ws, SealOptions(trigger="try_before", label=text, agent=agent), on_progress=on_progress
    )
    try:
        outcome = run_command(command, _cwd(ws, folder), launch=launch)
    except KeyboardInterrupt as stop:
        # The attempt stops here; what it did so far is sealed, so it can be rewound too.
        after: SnapshotRow | None = None
        with contextlib.suppress(Exception):
            after = seal(
                ws, SealOptions(trigger="try_after", label=text + " (interrupted)", agent=agent)
            )
        _note(stop, before, after)
        raise
    after = seal(
        ws, SealOptions(trigger="try_after", label=text, agent=agent), on_progress=on_progress
    )
    return Tried(before, after, outcome.exit_code, outcome.output)


def _note(stop: BaseException, before: SnapshotRow, after: SnapshotRow | None) -> None:
    """Notes on the interruption the attempt's snapshots, as a finished try answers them:
    `before` and `undo` (the state to rewind to), `after` (what the command had done when it
    was stopped; null when that seal failed too) and `undo_command`."""
    sealed = f"what it did so far is snapshot {after.id}; " if after is not None else ""
    note_interruption(
        stop,
        {
            "before": before.id,
            "after": after.id if after is not None else None,
            "undo": before.id,
            "undo_command": undo_command(before.id),
        },
        next_step=f"{sealed}to undo the attempt, run `{undo_command(before.id)}`",
    )
