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
    # A key the object must hold a list under (None: any object will do).
    listed: str | None = None


CONTROL_FILES = (
    ControlFile(
        "remotes/*.json",
        "the workspace's remotes (names and URLs): add each again with `till remote add URL "
        "--key-file KEYFILE` (their keys stay in the store's keys/ folder)",
        listed="remotes",
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


# The store's folders (format.md's layout): a file in the place of one is damage, and so is a
# folder in the place of a lock file (locks hold nothing: one is made again when needed).
FOLDERS = (
    "packs",
    "log",
    "locks",
    "intents",
    "tmp",
    "remotes",
    "remotes/seen",
    "remotes/index",
    "keys",
    "radar",
    "run",
    "coord",
    "projections",
)
LOCKS = "locks/*.lock"


@dataclass
class ControlReport:
    """What was wrong (`problems`: still wrong; `fixed`: mended by --repair), as (file, what)."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    fixed: list[tuple[str, str]] = field(default_factory=list)
    # The store's own shape is wrong (a folder of its layout is a file, or its format cannot
    # be told): checking its objects would only fail on the same damage.
    blocking: bool = False


def check_controls(home: Path, *, repair: bool) -> ControlReport:
    """Checks store.json and every control file in CONTROL_FILES; with `repair`, writes a
    damaged store.json again and sets every other damaged one aside. Never raises for damage."""
    report = ControlReport()
    _check_marker(home, repair, report)
    _check_layout(home, repair, report)
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
            if not control.read_text(path):
                return "it is empty"
        else:
            doc = control.read_json(path)
            if kind.listed is not None and not isinstance(doc.get(kind.listed), list):
                return f"it holds no {kind.listed} list"
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
        report.blocking = True
        return
    if done is not None:
        report.fixed.append((MARKER, f"{done[0]}; {done[1]}"))


def layout_problem(home: Path, path: Path) -> tuple[Path, str] | None:
    """For a file-system error at `path` inside the store at `home`: the entry of the store's
    layout that is of the wrong kind there (a file where a folder belongs, or a folder where a
    lock file or a control file belongs) and what is wrong with it; None when none is."""
    try:
        relative = path.relative_to(home)
    except ValueError:
        return None
    current = home
    for part in relative.parts:
        current = current / part
        try:
            is_dir = current.is_dir()
        except OSError:
            return None
        if not current.exists():
            return None
        if current != path and not is_dir:
            return current, "a file is where a folder belongs"
    if str(relative) in FOLDERS:
        return None if path.is_dir() else (path, "a file is where a folder belongs")
    if path.is_dir():
        return path, "a folder is where a file belongs"
    return None


def _check_layout(home: Path, repair: bool, report: ControlReport) -> None:
    """Every store folder that is a file, and every lock that is a folder: set aside and made
    again by `repair` (a folder made empty: what the file held was nothing tillage wrote)."""
    wrong = [home / f for f in FOLDERS if (home / f).exists() and not (home / f).is_dir()]
    if (home / "locks").is_dir():
        wrong += [p for p in sorted(home.glob(LOCKS)) if p.is_dir()]
    for path in wrong:
        name = str(path.relative_to(home))
        folder = str(path.relative_to(home)) in FOLDERS
        problem = (
            "a file is where a folder belongs" if folder else "a folder is where a lock belongs"
        )
        if not repair:
            report.problems.append((name, f"{problem}; `till verify --repair` sets it aside"))
            report.blocking = True
            continue
        moved = control.set_aside(path)
        if folder:
            path.mkdir(mode=0o700 if name in ("remotes", "keys") else 0o755)
        report.fixed.append((name, f"{problem}; set aside as {moved.name}, made again"))
