"""Public errors of the workspace module (codes -32080 to -32109; see tillage.errors)."""

from __future__ import annotations

from tillage.errors import InvalidArgumentError, TillageError


class RefusedRootError(InvalidArgumentError):
    name = "workspace.refused_root"
    module = "workspace"
    next_step = "attach a project folder instead, e.g. `till --repo ~/code/myproject watch`"


class FolderMissingError(InvalidArgumentError):
    name = "workspace.folder_missing"
    module = "workspace"
    next_step = "give --repo an existing folder"


class RewindStoppedError(TillageError):
    code = -32081
    name = "workspace.rewind_stopped"
    module = "workspace"
    next_step = "fix the cause, then rewind again; the state before it is the `undo` snapshot"


class UnreadablePathError(TillageError):
    code = -32080
    name = "workspace.unreadable"
    module = "workspace"
    next_step = "fix the file's permissions, or exclude it in .tillagepolicy"
