"""Public errors of the engine: the workspace module's (codes -32080 to -32109; see
tillage.errors), and merge.stopped, which the journal raises when a merge's landing stops part-way
(its code stays in merge's range: the wire identity is the error's, not the module's)."""

from __future__ import annotations

from tillage.errors import ConflictError, InvalidArgumentError, TillageError


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


class UnsafeControlDirError(InvalidArgumentError):
    """`.tillage` in the folder is a symlink or a file: writing through it could overwrite
    another project's files, so nothing is written and nothing is sealed."""

    name = "workspace.unsafe_control_dir"
    module = "workspace"
    next_step = "move the `.tillage` symlink or file out of the way, then run the command again"


class WorkspaceDiskFullError(TillageError):
    """The disk holding the workspace folder is full (not the store's)."""

    code = -32082
    name = "workspace.disk_full"
    module = "workspace"
    next_step = "free some space on the disk holding the workspace, then retry; nothing was lost"


class CopiedWorkspaceError(InvalidArgumentError):
    """The folder's pointer names a workspace that lives in another folder: this is a copy."""

    name = "workspace.copied"
    module = "workspace"
    next_step = (
        "this folder is a copy of another workspace: remove its `.tillage/` folder and run "
        "`till watch` to give it a timeline of its own"
    )


class MergeStoppedError(TillageError):
    """Landing failed part-way (a full disk, a permission): the workspace's `pre_merge`
    snapshot (`undo`) holds the state before it."""

    code = -32190
    name = "merge.stopped"
    module = "merge"
    next_step = "fix the cause and merge again; `till rewind UNDO --yes` puts the folder back"


class FolderMovedError(ConflictError):
    """The folder changed, along what a landing would write, since the seal its caller decided
    on: nothing was written (a sync pull answers `diverged` and keeps the edits)."""

    code = -32083
    name = "workspace.folder_moved"
    module = "workspace"
    next_step = "seal the folder and try again"

    def __init__(self, paths: list[str]) -> None:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(f"the folder changed while the landing was planned: {shown}")
        self.paths = tuple(paths)


class PointerDamagedError(TillageError):
    """Something that is not a file (a folder) holds the place of the folder's pointer,
    `.tillage/workspace.json`: tillage does not write over it."""

    code = -32084
    name = "workspace.pointer_damaged"
    module = "workspace"
    next_step = (
        "move `.tillage/workspace.json` out of the way (it is tillage's own file; a folder "
        "there holds nothing tillage wrote), then run the command again"
    )
