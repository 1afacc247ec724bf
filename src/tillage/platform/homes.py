"""Where the store is: the folder `TILLAGE_HOME` (or the XDG default) names, for every door.

Pure functions of an environment mapping and a working folder, with `os` alone: the console
script's socket door asks before it imports anything else, the command line and the Python
seam (`tillage.agent`) ask the same question, and the watcher answers for other processes,
so nothing here reads this process's own environment.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def user_home(env: Mapping[str, str]) -> str | None:
    """The user's home folder as `Path.home()` finds it, from `env` rather than this process's
    environment: `HOME`, else the password database; None when neither knows."""
    home = env.get("HOME")
    if home is None:
        try:
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):
            return None
    return home.rstrip("/") or "/"


def expand_user(path: str, env: Mapping[str, str]) -> str:
    """`~` and `~/x` against `env`'s home (as `Path.expanduser` does against the process's);
    `~name` from the password database."""
    if not path.startswith("~"):
        return path
    head, sep, rest = path.partition("/")
    if head == "~":
        home = user_home(env)
        if home is None:
            raise RuntimeError("Could not determine home directory.")
        return home + sep + rest if rest else home
    expanded = os.path.expanduser(path)  # ~name: the password database, no environment read
    if expanded.startswith("~"):
        raise RuntimeError("Could not determine home directory.")
    return expanded


def absolute(path: str, cwd: str) -> str:
    """`path` made absolute against `cwd` (not resolved: symlinks stay, as Path.absolute)."""
    return path if path.startswith("/") else os.path.join(cwd, path)


def store_home(env: Mapping[str, str], cwd: str) -> str:
    """The store's folder: `TILLAGE_HOME`, else `$XDG_DATA_HOME/tillage`, else
    `~/.local/share/tillage`; a relative one is taken against the caller's folder."""
    if env.get("TILLAGE_HOME"):
        return _clean(absolute(expand_user(env["TILLAGE_HOME"], env), cwd))
    data = env.get("XDG_DATA_HOME")
    if not data:
        home = user_home(env)
        if home is None:
            raise RuntimeError("Could not determine home directory.")
        data = os.path.join(home, ".local", "share")
    return _clean(os.path.join(absolute(data, cwd), "tillage"))


def _clean(path: str) -> str:
    """Drops `.` and repeated slashes as pathlib does (keeps `..`: it may cross a symlink)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)
