"""Where a command line points: its command word, its folder, the store, the workspace's watcher.

Worked out with `os` alone, because the console script's socket door (fast.py) asks these
questions before it knows whether it will import anything else, and the full command line
(main.py) asks the same ones: one answer for both doors. Everything takes the caller's working
folder and environment as arguments (the watcher runs command lines for other processes), never
this process's.
"""

from __future__ import annotations

import os

# The store's location is every door's question (the Python seam asks it too): one answer.
from tillage.platform.homes import absolute as absolute  # noqa: PLC0414
from tillage.platform.homes import expand_user as expand_user  # noqa: PLC0414
from tillage.platform.homes import store_home as store_home  # noqa: PLC0414
from tillage.platform.homes import user_home as user_home  # noqa: PLC0414

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

# Kept equal to tillage.core.paths.CONTROL_DIR, tillage.workspace.attach.POINTER and
# tillage.workspace.watchstate.socket_path by tests/cli/test_fast_door.py: importing those
# modules costs more than this whole door is allowed to.
CONTROL_DIR = ".tillage"
POINTER = "workspace.json"
_HEX = frozenset("0123456789abcdef")

# Global flags that take a value, so the word after them is not the command.
VALUE_FLAGS = ("--repo", "--color")


def command_word(argv: Sequence[str]) -> str | None:
    """Returns the first word that is not a global flag (or its value): the command."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in VALUE_FLAGS:
            skip = True
        elif not word.startswith("-"):
            return word
        elif word == "--":
            return None
    return None


def command_of(argv: Sequence[str], groups: Collection[str]) -> str | None:
    """Returns the command a command line names: its first word that is not a global flag, or,
    when that word is a group of commands (`session`), it and the next such word joined by a
    space (`session start`); a group word with nothing after it is returned alone."""
    words: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in VALUE_FLAGS:
            skip = True
        elif word == "--":
            break
        elif not word.startswith("-"):
            words.append(word)
            if words[0] not in groups or len(words) == 2:
                break
    return " ".join(words) if words else None


def repo_arg(argv: Sequence[str]) -> str | None:
    """Returns the `--repo` value the command line gives (the last one wins, as in argparse)."""
    found = None
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word == "--repo":
            found = next(words, None)
        elif word.startswith("--repo="):
            found = word[len("--repo=") :]
    return found


def socket_path(home: str, workspace_id: str) -> str:
    """The watcher's socket for a workspace (the rule of watchstate.socket_path)."""
    return f"{home}/run/watch-{workspace_id}.sock"


def workspace_id(start: str) -> str | None:
    """The ID in the nearest `.tillage/workspace.json` at or above `start` (a real folder, never
    through a `.tillage` symlink), or None. Only a hint of which watcher to ask: the command
    itself still finds its workspace the full way, wherever it runs."""
    try:
        folder = os.path.realpath(start)
    except (OSError, ValueError):
        return None
    while True:
        found = _pointer(folder)
        if found is not None:
            return found or None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _pointer(folder: str) -> str | None:
    """The workspace ID in `folder`'s pointer; "" when the folder has a `.tillage` but no
    readable pointer (stop looking: it decides); None when it has none (look further up)."""
    control = os.path.join(folder, CONTROL_DIR)
    try:
        st = os.lstat(control)
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o040000:  # a symlink or a file: never followed
        return ""
    try:
        fd = os.open(os.path.join(control, POINTER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return ""
    finally:
        os.close(fd)
    # The pointer is written as json.dumps({"workspace": ID}); any other shape is not a hint
    # this door trusts (the full command line reads it properly).
    text = raw.decode("ascii", "replace").strip()
    prefix, suffix = '{"workspace": "', '"}'
    if not (text.startswith(prefix) and text.endswith(suffix)):
        return ""
    wid = text[len(prefix) : -len(suffix)]
    return wid if wid and set(wid) <= _HEX else ""
