"""Public errors of forks (universes): shared codes with specific names, and the forks range.

Apart from the feature code so that the fork verbs can name them in their contracts without
importing the copy and seal machinery (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import ConflictError, InvalidArgumentError, NotFoundError, TillageError


class InvalidForkNameError(InvalidArgumentError):
    """A fork name is a short slug: 1 to 40 characters of a-z, 0-9, '.', '_' and '-',
    starting with a letter or digit (lower case only, so two names never differ by case
    alone on a file system that folds it)."""

    name = "fork.invalid_name"
    module = "forks"
    next_step = "pick a name like `feature-x` (a-z, 0-9, '.', '_', '-'; at most 40 characters)"


class ForkExistsError(ConflictError):
    """A live fork of this workspace already has that name: it is never overwritten."""

    name = "fork.exists"
    module = "forks"
    next_step = "pick another name, or remove the old fork with `till fork-rm NAME --yes`"

    @classmethod
    def named(cls, name: str, why: str = "") -> ForkExistsError:
        """The error for fork `name`, its next step naming it."""
        return cls(
            f"this workspace already has a fork called {name!r}{why}",
            next_step=f"pick another name, or remove the old fork with `till fork-rm {name} --yes`",
            details={"fork": name},
        )


class DestinationExistsError(ConflictError):
    """Something already exists where the fork would be made: it is never overwritten."""

    name = "fork.destination_exists"
    module = "forks"
    next_step = "pick another --destination (it must not exist yet) or another name"


class BadDestinationError(InvalidArgumentError):
    """The destination cannot hold a fork: inside the workspace (it would be sealed into its
    parent), inside or holding tillage's store, inside another attached workspace, or its
    parent folder does not exist."""

    name = "fork.bad_destination"
    module = "forks"
    next_step = "pick a --destination outside the workspace and the store, e.g. beside it"


class ForkNotFoundError(NotFoundError):
    """No live fork of this workspace has that name."""

    name = "fork.not_found"
    module = "forks"
    next_step = "list this workspace's forks with `till forks`"


class NotTheForkError(TillageError):
    """The folder at the fork's recorded path is not that fork (its `.tillage` pointer names
    another workspace, or none): tillage refuses to remove or use it."""

    code = -32160
    name = "fork.not_the_fork"
    module = "forks"
    next_step = (
        "look at the folder yourself; `till fork-rm NAME --keep-files --yes` retires the fork "
        "without touching any folder"
    )


class ForkFolderMissingError(TillageError):
    """The fork's folder is gone (deleted or moved outside tillage)."""

    code = -32161
    name = "fork.folder_missing"
    module = "forks"
    next_step = "retire it with `till fork-rm NAME --yes` (its last sealed state stays restorable)"


class ForkHasForksError(ConflictError):
    """The fork has live forks of its own: removing it would orphan them."""

    name = "fork.has_forks"
    module = "forks"
    next_step = "remove its forks first (`till forks` inside it lists them)"


class ForkCopyError(TillageError):
    """The workspace could not be copied (a file or folder that cannot be read, a destination
    that cannot be written): no fork was made and nothing was left behind."""

    code = -32162
    name = "fork.copy_failed"
    module = "forks"
    next_step = "fix the permission or the path the message names, then fork again"


class SnapshotPartialError(TillageError):
    """`fork --at` (or `exec --at`) of a snapshot a gc thinned: some of its files' bytes are
    gone (their class outlived its byte window). A fork without them would merge back as their
    deletion, so none is made; `details.missing` lists what the snapshot lacks."""

    code = -32163
    name = "fork.snapshot_partial"
    module = "forks"
    next_step = (
        "fork the live folder, or a snapshot that is whole (`till show ID` lists what one "
        "lacks; `till timeline` marks partial ones)"
    )


class BadPortError(InvalidArgumentError):
    """The caller's `$PORT`, the base a universe's port is counted from, is not a TCP port
    below 65535 (a fork needs one above it): nothing was made."""

    name = "fork.bad_port"
    module = "forks"
    next_step = "set PORT to a number from 1 to 65534, or unset it (the base is then 3000)"


class NoFreePortError(TillageError):
    """Every TCP port above the base is held by a live fork of this family or in use on
    127.0.0.1, so the new universe would have none of its own: nothing was made."""

    code = -32164
    name = "fork.no_free_port"
    module = "forks"
    next_step = (
        "remove forks you are done with (`till fork-rm NAME --yes`) or start from a lower "
        "base (PORT=3000)"
    )
