"""Workspace-relative paths: parsing and refusing anything that could leave the root.

A workspace path is a str of '/'-separated names (file-system bytes decoded with
surrogateescape, so every name round-trips). It never starts with '/', never holds '..', and
never names the workspace's own `.tillage/` folder.
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError, echo

CONTROL_DIR = ".tillage"


def fs_decode(name: bytes) -> str:
    """Decodes a file-system name the way os.fsdecode does on Linux (lossless)."""
    return name.decode("utf-8", "surrogateescape")


def fs_encode(name: str) -> bytes:
    """Encodes a workspace name back to file-system bytes (lossless)."""
    return name.encode("utf-8", "surrogateescape")


def join(parent: str, name: str) -> str:
    """Joins a workspace directory path and a name ('' is the root)."""
    return f"{parent}/{name}" if parent else name


def parse(raw: str) -> str:
    """Returns `raw` as a normalized workspace path; raises invalid_argument when it could
    escape the root (absolute, '..', NUL) or is empty."""
    if not raw or "\0" in raw:
        raise InvalidArgumentError(f"not a workspace path: {echo(raw)}")
    if raw.startswith("/"):
        raise InvalidArgumentError(
            f"absolute paths are refused: {echo(raw)}",
            next_step="give the path relative to the workspace root",
        )
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise InvalidArgumentError(
            f"'..' is refused in workspace paths: {echo(raw)}",
            next_step="give the path relative to the workspace root, without '..'",
        )
    if not parts:
        raise InvalidArgumentError(f"not a workspace path: {echo(raw)}")
    if parts[0] == CONTROL_DIR:
        raise InvalidArgumentError(f"{CONTROL_DIR}/ is tillage's own folder: {echo(raw)}")
    return "/".join(parts)


def covers(scope: str, path: str) -> bool:
    """Tells whether `path` is `scope` itself or lies below it."""
    return path == scope or path.startswith(scope + "/")


def ancestors(path: str) -> list[str]:
    """Returns the directory paths above `path`, outermost first ('a', 'a/b' for 'a/b/c')."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
