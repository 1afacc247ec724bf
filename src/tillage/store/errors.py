"""Public errors of the store module (codes -32110 to -32139; see tillage.errors)."""

from __future__ import annotations

from tillage.errors import (
    AmbiguousError,
    IntegrityError,
    InvalidArgumentError,
    NotFoundError,
    TillageError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


class SnapshotNotFoundError(NotFoundError):
    name = "snapshot.not_found"
    module = "store"
    next_step = "list snapshots with `till timeline`"


class SnapshotAmbiguousError(AmbiguousError):
    name = "snapshot.ambiguous"
    module = "store"
    next_step = "give more characters of the snapshot ID (see `till timeline`)"


class BadSnapshotIdError(InvalidArgumentError):
    name = "snapshot.bad_id"
    module = "store"
    next_step = (
        "give a snapshot ID or a unique prefix of at least 6 hex characters, a fork's name, "
        "`head`, `head~N` or `latest` (see `till timeline` and `till forks`)"
    )


class SnapshotBeyondTimelineError(NotFoundError):
    """`head~N` counts back past the oldest snapshot of the timeline; `details.snapshots` is
    how many it holds."""

    name = "snapshot.beyond_timeline"
    module = "store"
    next_step = "list the timeline with `till timeline`"


class LiveFolderError(InvalidArgumentError):
    """`@` (the folder as it is now) was given where only a stored snapshot will do: a rewind's
    target, a pin, a fork's starting point. `diff`, `ls` and `cat` take it."""

    code = -32320
    name = "snapshot.live_folder"
    module = "names"
    next_step = (
        "give a stored snapshot: `head` (the newest), an ID from `till timeline`, or seal the "
        "folder first with `till snap`"
    )


class StoreDamagedError(IntegrityError):
    name = "store.damaged"
    module = "store"
    next_step = "run `till verify --repair`; snapshots whose objects are intact stay readable"


class StoreFormatError(IntegrityError):
    code = -32111
    name = "store.format_unsupported"
    module = "store"
    next_step = "this store was written by a newer tillage; upgrade tillage"


class StoreReadOnlyError(TillageError):
    """The store cannot be written by this process (permissions or a read-only mount);
    reading commands still work."""

    code = -32112
    name = "store.read_only"
    module = "store"
    next_step = (
        "reading commands (timeline, show, diff, cat, status) still work; to seal or rewind, "
        "make the store writable or point TILLAGE_HOME at a writable copy"
    )

    @classmethod
    def at(cls, home: Path) -> StoreReadOnlyError:
        """The error for a command that needs to write the store at `home`."""
        return cls(f"the store at {home} is read-only: this command needs to write to it")


class ControlFileDamagedError(IntegrityError):
    """One of the store's control files (store.json, a workspace's remotes, an interrupted
    operation's record) cannot be read: a folder in its place, bytes that are not UTF-8 or
    JSON, or JSON of another shape. `details.file` names it; nothing was changed."""

    code = -32113
    name = "store.control_damaged"
    module = "store"
    next_step = (
        "run `till verify --repair`: it rebuilds what can be rebuilt, sets the damaged file "
        "aside and says what it could not rebuild"
    )

    @classmethod
    def of(
        cls, path: Path, problem: str, *, next_step: str | None = None
    ) -> ControlFileDamagedError:
        """The error for the control file at `path`, which is damaged as `problem` says."""
        return cls(
            f"{path} is damaged: {problem}",
            next_step=next_step,
            details={"file": str(path), "problem": problem},
        )
