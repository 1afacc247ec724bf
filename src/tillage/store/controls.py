"""What `verify` checks of the store's control files, and what `--repair` does with each one
that cannot be read: store.json is written again (its content is derivable); any other is set
aside as `<name>.damaged` (kept, never deleted) and the report says what that loses and which
command gets it back. It runs before the store is opened, so no damage stops it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tillage.platform.fs import TEMP_MARK
from tillage.store import control
from tillage.store.errors import ControlFileDamagedError
from tillage.store.marker import MARKER, check_format, repair_marker


@dataclass(frozen=True)
class ControlFile:
    """A kind of control file: where it lives (a glob under the store), its shape, and what
    setting a damaged one aside loses and how to get it back."""

    pattern: str
    lost: str
    text: bool = False


CONTROL_FILES = (
    ControlFile(
        "remotes/*.json",
        "the workspace's remotes (names and URLs): add each again with `till remote add URL "
        "--key-file KEYFILE` (their keys stay in the store's keys/ folder)",
    ),
    ControlFile(
        "remotes/seen/*/*.json",
        "what this machine last saw of a remote's ref: the next sync takes the remote's ref as "
        "it is, so a rollback made before then is not detected",
    ),
    ControlFile(
        "remotes/machine-id",
        "this machine's ID: the next sync makes a new one; a lease the old ID held on a remote "
        "is another machine's now: wait for it to run out, or `till sync --push --takeover --yes`",
        text=True,
    ),
    ControlFile(
        "radar/*.json", "the radar's last look (a cache): the next `till radar` looks again"
    ),
    ControlFile(
        "intents/*.json",
        "an interrupted operation's record, so it cannot be finished: if a rewind or merge was "
        "interrupted, put the folder back with `till rewind UNDO --yes` (its `pre_rewind` or "
        "`pre_merge` snapshot in `till timeline`); a fork's or clone's half-made folder can be "
        "deleted",
    ),
)


@dataclass
class ControlReport:
    """What was wrong (`problems`: still wrong; `fixed`: mended by --repair), as (file, what)."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    fixed: list[tuple[str, str]] = field(default_factory=list)


def check_controls(home: Path, *, repair: bool) -> ControlReport:
    """Checks store.json and every control file in CONTROL_FILES; with `repair`, writes a
    damaged store.json again and sets every other damaged one aside. Never raises for damage."""
    report = ControlReport()
    _check_marker(home, repair, report)
    for kind in CONTROL_FILES:
        for path in sorted(home.glob(kind.pattern)):
            if control.DAMAGED_SUFFIX in path.name or TEMP_MARK in path.name:
                continue
            problem = _problem(path, kind)
            if problem is None:
                continue
            name = str(path.relative_to(home))
            if not repair:
                report.problems.append((name, f"{problem}; `till verify --repair` sets it aside"))
                continue
            moved = control.set_aside(path)
            report.fixed.append(
                (name, f"{problem}; set aside as {moved.name}, which loses {kind.lost}")
            )
    return report


def _problem(path: Path, kind: ControlFile) -> str | None:
    try:
        if kind.text:
            control.read_text(path)
        else:
            control.read_json(path)
    except ControlFileDamagedError as exc:
        return str(exc.details["problem"])
    return None


def _check_marker(home: Path, repair: bool, report: ControlReport) -> None:
    if not repair:
        try:
            check_format(home)
        except ControlFileDamagedError as exc:
            report.problems.append(
                (MARKER, f"{exc.details['problem']}; `till verify --repair` writes it again")
            )
        return
    try:
        done = repair_marker(home)
    except ControlFileDamagedError as exc:
        report.problems.append((MARKER, f"{exc.details['problem']}; {exc.next}"))
        return
    if done is not None:
        report.fixed.append((MARKER, f"{done[0]}; {done[1]}"))
