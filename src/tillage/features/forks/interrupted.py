"""What an interrupted `run` or `exec` (Ctrl-C, SIGTERM) keeps: each universe it made or ran
in is sealed as the interruption left it, so the work done so far is in its timeline, and is
named (name, path, base, head, port) in the `interrupted` error's details, so the caller can
find it without listing every fork. The commands are stopped first (platform/commands)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tillage.errors import note_interruption
from tillage.features.forks.fork import finish_pending, open_fork
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.workspace.attach import Workspace, holds_pointer


@dataclass(frozen=True)
class Kept:
    """A universe an interrupted command leaves: its record (with its port), base and head
    (sealed after the interruption, or the last state sealed when that seal could not run),
    its place in its batch, and its command's status when that command had ended (None when
    it never started or was not seen to end)."""

    row: ForkRow
    base: str
    head: SnapshotRow | None
    index: int
    count: int
    exit_code: int | None


def keep_universes(
    ws: Workspace,
    names: Sequence[str],
    label: str,
    exit_codes: Mapping[str, int],
) -> list[Kept]:
    """Seals each live fork of `ws` among `names` (trigger `fork`, `label`) and returns them
    in order. A fork recorded but not yet renamed into place is finished first. A second
    interruption stops the sealing (the rest keep their last sealed state); a seal that
    fails leaves that fork's last state too: the interruption is what the caller is told."""
    from tillage.workspace.seal import SealOptions, seal

    with contextlib.suppress(Exception):
        finish_pending(ws)
    kept: list[Kept] = []
    sealing = True
    for index, name in enumerate(names, start=1):
        row = ws.store.fork_named(ws.id, name)
        if row is None:
            continue
        head: SnapshotRow | None = None
        if sealing and holds_pointer(Path(row.root), row.workspace):
            options = SealOptions(trigger="fork", label=label, skip_unchanged=True)
            try:
                head = seal(open_fork(ws, row), options)
            except KeyboardInterrupt:
                sealing = False
            except Exception:
                pass  # the interruption is the answer; the last sealed state stands
        if head is None:
            head = ws.store.head(row.workspace)
        kept.append(Kept(row, row.base, head, index, len(names), exit_codes.get(name)))
    return kept


def describe(kept: Kept) -> dict[str, Any]:
    """A kept universe as the details name it: the fields of an exec universe (`name` and
    `fork` both), less its output."""
    return {
        "name": kept.row.name,
        "fork": kept.row.name,
        "path": kept.row.root,
        "base": kept.base,
        "head": kept.head.id if kept.head is not None else None,
        "workspace": kept.row.workspace,
        "port": kept.row.port,
        "index": kept.index,
        "count": kept.count,
        "exit_code": kept.exit_code,
    }


def note_universes(exc: BaseException, kept: Sequence[Kept]) -> None:
    """Names an interrupted exec's universes in the interruption (details.universes)."""
    note_interruption(
        exc,
        {"universes": [describe(k) for k in kept]},
        next_step=(
            "the universes made so far are sealed as they were (details.universes): look at "
            "them with `till forks`, land one with `till merge NAME`, or remove them with "
            "`till fork-rm NAME --yes`"
            if kept
            else None
        ),
    )


def note_fork(exc: BaseException, kept: Sequence[Kept]) -> None:
    """Names an interrupted run's fork in the interruption (details.fork; null when the
    interruption came before the fork existed)."""
    note_interruption(
        exc,
        {"fork": describe(kept[0]) if kept else None},
        next_step=(
            f"fork {kept[0].row.name} is sealed as it was (details.fork): run in it again, "
            f"or see what it changed with `till diff {kept[0].base[:12]} --to {kept[0].row.name}`"
            if kept
            else None
        ),
    )
