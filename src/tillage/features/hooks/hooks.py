"""Agent-turn hooks on disk: sealing an attributed restore point fast, and installing hooks.

A hook runs after every tool call of an agent, so it waits only briefly for a busy workspace
and seals only when something changed after a tool. Installing writes nothing through a `.claude`
or `.tillage` that is a symlink, keeps every setting the user had, and writes nothing at all
when tillage's hooks are already in place (so a second install leaves the file byte-identical).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tillage.core.agent_hooks import (
    CLAUDE_EVENTS,
    EVENTS,
    GENERIC_HEADER,
    SettingsShapeError,
    generic_script,
    hook_command,
    json_indent,
    merge_claude_settings,
    unmerge_claude_settings,
)
from tillage.core.paths import CONTROL_DIR
from tillage.features.hooks.errors import InvalidAgentSettingsError, UnsafeSettingsDirError
from tillage.platform.fs import atomic_write_at
from tillage.store.rows import SessionCommitRow, SnapshotRow
from tillage.workspace.attach import Workspace
from tillage.workspace.errors import UnsafeControlDirError
from tillage.workspace.locks import workspace_lock
from tillage.workspace.seal import SealOptions, seal_locked

# How long a hook waits for another tillage process (the watcher sealing, a rewind) to let go of
# the workspace before it answers `busy`: long enough for a seal of an ordinary workspace, short
# enough that the agent never notices.
HOOK_LOCK_TIMEOUT = 2.0

CLAUDE_DIR = ".claude"
# The project's settings (teams commit them) and the checkout's own (Claude Code's docs: "not
# committed"): hooks that name `till` on PATH go in the first, hooks that must name this
# machine's path to it in the second.
CLAUDE_SETTINGS = "settings.json"
CLAUDE_LOCAL_SETTINGS = "settings.local.json"
HOOKS_DIR = "hooks"


@dataclass(frozen=True)
class HookSeal:
    """What a hook sealed: the snapshot (the unchanged head when nothing changed after a tool,
    or None on an empty timeline) and whether it is new; `commit`, the session commit that
    holds it when the hook extended its session's changelog."""

    snapshot: SnapshotRow | None
    sealed: bool
    commit: SessionCommitRow | None = None


# Which hooks extend the session's changelog (features/sessions/sessions.py), and how: a
# turn's first hook starts the chain (its baseline is the folder before the agent's first
# turn), its end records what the turn changed. A tool's hook does not: a turn is the unit
# of a changelog.
SESSION_STEPS = {"pre-turn": "start", "turn-end": "record", "session-end": "end"}


def seal_hook(ws: Workspace, options: SealOptions, *, event: str | None = None) -> HookSeal:
    """Seals an attributed restore point; `busy` after HOOK_LOCK_TIMEOUT seconds of waiting.

    With a session (`options.session`, a valid session ID) a `pre-turn` starts that session's
    chain when it has none, a `turn-end` records a commit and a `session-end` records one and
    marks the session ended, each naming the snapshot just sealed, under the same lock: no
    second seal, and no other commit can come in between."""
    from tillage.core.sessions import session_id_problem

    step = SESSION_STEPS.get(event or "")
    session = options.session
    with workspace_lock(ws, timeout=HOOK_LOCK_TIMEOUT):
        before = ws.store.head(ws.id)
        row = seal_locked(ws, options)
        commit = None
        if step is not None and session and session_id_problem(session) is None:
            from tillage.features.sessions.sessions import chain_locked, end_locked

            prev = ws.store.session_head(ws.id, session)
            done = chain_locked(
                ws,
                session,
                row,
                options.label or f"hook {event}",
                options.agent,
                prev,
                start_only=step == "start",
            )
            if step == "end":
                done = end_locked(ws, session, done)
            commit = done.commit
    sealed = before is None or row.id != before.id
    return HookSeal(snapshot=row, sealed=sealed, commit=commit)


def session_turn(ws: Workspace, session: str | None, event: str) -> str | None:
    """The turn of an agent session that did not number its turns (Claude Code's payload has
    no turn): the count of the session's pre-turn restore points, this one included. None
    without a session, or before the session's first pre-turn."""
    if not session:
        return None
    # Counted in the index, no row read: a long session has thousands of hook snapshots, and
    # reading them all (Store.snapshots) at every hook cost ~10 ms a thousand.
    prefix = "hook pre-turn"
    row = ws.store.conn.execute(
        "SELECT COUNT(*) FROM snapshots WHERE workspace=? AND trigger='hook' AND session=?"
        " AND substr(label, 1, ?) = ?",
        (ws.id, session, len(prefix), prefix),
    ).fetchone()
    turns = int(row[0])
    if event == "pre-turn":
        turns += 1
    return str(turns) if turns else None


def till_command() -> tuple[str, ...]:
    """How a hook calls this same tillage: the `till` script installed beside the running
    interpreter (an absolute path, so no PATH or virtualenv is needed), else the interpreter
    with `-m tillage`."""
    python = Path(sys.executable).absolute()
    script = python.parent / "till"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    return (str(python), "-m", "tillage")


@dataclass(frozen=True)
class HookTill:
    """How installed hooks call tillage: the bare `till` when the one on PATH is this one
    (`shared`: the hooks go in the settings teams commit), else this machine's absolute path
    (they go in the checkout's own settings), and why."""

    words: tuple[str, ...]
    shared: bool
    why: str


def hook_till(search_path: str | None) -> HookTill:
    """Whether the `till` that `search_path` (a PATH value; None: none known) finds is this
    tillage: the same file as till_command()'s script, through any symlinks."""
    import shutil

    ours = till_command()
    found = shutil.which("till", path=search_path) if search_path else None
    if found is None:
        return HookTill(ours, False, "`till` is not on PATH")
    if len(ours) == 1 and os.path.realpath(found) == os.path.realpath(ours[0]):
        return HookTill(("till",), True, f"`till` on PATH is this tillage ({found})")
    return HookTill(ours, False, f"`till` on PATH is {found}, not this tillage ({ours[0]})")


def _open_dir(parent_fd: int, name: str, where: Path, *, control: bool) -> int:
    """Opens (creating) the folder `name` below `parent_fd`, never through a symlink."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    path = where / name
    kind = "a symlink" if path.is_symlink() else "not a folder"
    message = f"{path} is {kind}: tillage will not write through it"
    if control:
        raise UnsafeControlDirError(message, details={"path": str(path)})
    raise UnsafeSettingsDirError(message, details={"path": str(path)})


def _read_at(dir_fd: int, name: str, where: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; refuses a symlink or a non-file."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a file"
        raise UnsafeSettingsDirError(
            f"{where / name} is {kind}: tillage will not replace it",
            details={"path": str(where / name)},
        )
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_in_root(ws: Workspace, name: str, *, control: bool) -> int:
    """Opens (making it if needed) the folder `name` right under the workspace root, never
    through a symlink."""
    root_fd = _open_root(ws)
    try:
        return _open_dir(root_fd, name, ws.root, control=control)
    finally:
        os.close(root_fd)


def _open_root(ws: Workspace) -> int:
    return os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def install_claude_code(ws: Workspace, till: HookTill) -> tuple[list[str], Path]:
    """Merges tillage's hooks into `<workspace>/.claude/settings.json` (`till.shared`) or
    `settings.local.json` and takes them out of the other, so they run once; returns the paths
    written (none when all was in place already) and the file that holds the hooks. Both
    files are read and changed in memory first: one that cannot be read leaves both as they
    were."""
    commands = {name: hook_command(till.words, event) for name, event in CLAUDE_EVENTS.items()}
    name, other = (
        (CLAUDE_SETTINGS, CLAUDE_LOCAL_SETTINGS)
        if till.shared
        else (CLAUDE_LOCAL_SETTINGS, CLAUDE_SETTINGS)
    )
    folder = ws.root / CLAUDE_DIR
    dir_fd = _open_in_root(ws, CLAUDE_DIR, control=False)
    try:
        merge = lambda doc: merge_claude_settings(doc, commands)  # noqa: E731
        planned = [
            _planned(dir_fd, folder, name, merge, create=True),
            _planned(dir_fd, folder, other, unmerge_claude_settings, create=False),
        ]
        return _write_planned(dir_fd, folder, planned), folder / name
    finally:
        os.close(dir_fd)


def uninstall_claude_code(ws: Workspace) -> list[str]:
    """Takes tillage's hooks (any `till`, any folder) out of both settings files, keeping
    everything else; returns the paths written (none when there were none of ours)."""
    folder = ws.root / CLAUDE_DIR
    if not os.path.lexists(folder):
        return []
    dir_fd = _open_in_root(ws, CLAUDE_DIR, control=False)  # refuses a symlink, a non-folder
    try:
        planned = [
            _planned(dir_fd, folder, name, unmerge_claude_settings, create=False)
            for name in (CLAUDE_SETTINGS, CLAUDE_LOCAL_SETTINGS)
        ]
        return _write_planned(dir_fd, folder, planned)
    finally:
        os.close(dir_fd)


def _planned(
    dir_fd: int, folder: Path, name: str, change: Callable[[Any], Any], *, create: bool
) -> tuple[str, bytes] | None:
    """The settings file `name` (in the folder `dir_fd`) with `change` applied (a document
    in, a document out), as (name, bytes to write); None when it comes back equal, or when
    the file does not exist and `create` is false. Refuses a file that is not a JSON object
    of Claude Code's shape (hook.invalid_settings)."""
    path = folder / name
    old = _read_at(dir_fd, name, folder)
    if old is None and not create:
        return None
    doc = _parse_settings(old, path) if old is not None else {}
    try:
        changed = change(doc)
    except SettingsShapeError as exc:
        raise InvalidAgentSettingsError(
            f"{path}: {exc}; it was left untouched", details={"path": str(path)}
        ) from None
    if old is not None and changed == doc:
        return None
    indent = json_indent(old.decode("utf-8")) if old is not None else "  "
    text = json.dumps(changed, indent=indent, ensure_ascii=False) + "\n"
    return name, text.encode("utf-8")


def _write_planned(dir_fd: int, folder: Path, planned: list[tuple[str, bytes] | None]) -> list[str]:
    """Writes each planned file atomically, in order; returns their paths."""
    written = []
    for plan in planned:
        if plan is not None:
            atomic_write_at(dir_fd, plan[0], plan[1])
            written.append(str(folder / plan[0]))
    return written


def _parse_settings(data: bytes, path: Path) -> dict[str, object]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidAgentSettingsError(
            f"{path} is not valid JSON ({exc}); it was left untouched",
            details={"path": str(path)},
        ) from None
    if not isinstance(doc, dict):
        raise InvalidAgentSettingsError(
            f"{path} is not a JSON object; it was left untouched", details={"path": str(path)}
        )
    return doc


def install_generic(ws: Workspace, till: tuple[str, ...]) -> list[str]:
    """Writes executable `pre-turn`, `post-tool` and `turn-end` scripts into
    `<workspace>/.tillage/hooks/`; returns the paths written (none already up to date)."""
    control_fd = _open_in_root(ws, CONTROL_DIR, control=True)
    try:
        hooks_fd = _open_dir(control_fd, HOOKS_DIR, ws.root / CONTROL_DIR, control=True)
    finally:
        os.close(control_fd)
    folder = ws.root / CONTROL_DIR / HOOKS_DIR
    written: list[str] = []
    try:
        for event in EVENTS:
            script = generic_script(till, str(ws.root), event).encode("utf-8")
            if _up_to_date(hooks_fd, event, script, folder):
                continue
            atomic_write_at(hooks_fd, event, script, mode=0o755)
            _make_executable(hooks_fd, event)
            written.append(str(folder / event))
    finally:
        os.close(hooks_fd)
    return written


def uninstall_generic(ws: Workspace) -> list[str]:
    """Removes the scripts `install_generic` wrote (a file there that is not one of ours is
    left alone); returns the paths removed."""
    folder = ws.root / CONTROL_DIR / HOOKS_DIR
    try:
        hooks_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise UnsafeControlDirError(
            f"{folder} is a symlink or not a folder: tillage will not change it",
            details={"path": str(folder)},
        ) from None
    removed = []
    try:
        for event in EVENTS:
            current = _read_at(hooks_fd, event, folder)
            if current is None or not current.startswith(GENERIC_HEADER.encode()):
                continue
            os.unlink(event, dir_fd=hooks_fd)
            removed.append(str(folder / event))
    finally:
        os.close(hooks_fd)
    return removed


def _make_executable(dir_fd: int, name: str) -> None:
    """Sets the script's mode to 0755 whatever the umask (through an fd: never a symlink)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)


def _up_to_date(dir_fd: int, name: str, script: bytes, folder: Path) -> bool:
    current = _read_at(dir_fd, name, folder)
    if current != script:
        return False
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    return mode & 0o111 == 0o111
