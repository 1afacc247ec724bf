"""Public errors of projections (`till project hydrate | flush`): shared codes with specific
names, and the projection range.

The library itself raises plain exceptions (PlaceUnreadableError, UnsafePathError, a
collection's own failure) for harnesses to catch by type; these are what the doors answer
for them, with a code and a next step.
"""

from __future__ import annotations

from tillage.errors import IntegrityError, InvalidArgumentError, TillageError

MOUNT_EXAMPLE = "--mount artifacts=sqlite:runs.db#artifacts --read-only reference=dir:docs"


class BadMountError(InvalidArgumentError):
    """A --mount or --read-only value that is not PREFIX=sqlite:PATH[#TABLE] or PREFIX=dir:PATH
    (an unknown scheme, a bad table name, a prefix that leaves the folder), one collection or
    one prefix mounted twice, or a folder collection that overlaps the folder it would be
    projected into. Nothing was read or written."""

    name = "projection.bad_mount"
    module = "projection"
    next_step = (
        f"write each mount as PREFIX=sqlite:PATH#TABLE or PREFIX=dir:PATH, e.g. {MOUNT_EXAMPLE}"
    )


class NoMountsError(InvalidArgumentError):
    """No mount was given and none is recorded for this folder (it was never hydrated)."""

    name = "projection.no_mounts"
    module = "projection"
    next_step = (
        f"hydrate the folder first (`till project hydrate {MOUNT_EXAMPLE}`), or pass --mount"
    )


class UnsafePlacePathError(InvalidArgumentError):
    """A path that would leave the folder: through a symlink (at the file or at a folder above
    it), or an entry whose key is absolute or holds `..`. Refused, never followed."""

    name = "projection.unsafe_path"
    module = "projection"
    next_step = "remove the symlink the message names (or rename the entry), then run again"


class FolderUnreadableError(TillageError):
    """The folder could not be listed, so the flush decided nothing: nothing was read from a
    collection and nothing was written. The files are where the run left them."""

    code = -32250
    name = "projection.place_unreadable"
    module = "projection"
    next_step = "make the folder readable (the message says why it was not), then flush again"


class CollectionFailedError(TillageError):
    """A collection could not be read or written (an SQLite error, a file that cannot be
    opened): the work did not reach the store. Entries committed before it are kept (the next
    flush sees them as converged); the files are still in the folder."""

    code = -32251
    name = "projection.collection_failed"
    module = "projection"
    next_step = "fix what the message names in the collection, then run the same command again"


class PlaceFailedError(TillageError):
    """A file in the folder could not be read or written (permissions, a full disk). A flush
    stopped there: what it committed before is kept, and the next flush decides the rest."""

    code = -32252
    name = "projection.place_failed"
    module = "projection"
    next_step = "fix the file or folder the message names, then run the same command again"


class StateDamagedError(IntegrityError):
    """The record a hydrate keeps for a folder (its mounts and baseline, under the store's
    home) cannot be read: it was not written by tillage, or was damaged since."""

    name = "projection.state_damaged"
    module = "projection"
    next_step = "remove the file the message names and hydrate the folder again"


class UnflushedEditsError(TillageError):
    """A hydrate would overwrite files holding edits that were never flushed (or files the
    run created where the collection has an entry): nothing was written."""

    code = -32253
    name = "projection.unflushed_edits"
    module = "projection"
    next_step = "flush first (`till project flush`), or move the files the message names away"


class PlaceReplacedError(TillageError):
    """The folder is not the one that was hydrated (it was removed and made again, or another
    folder now has its path): a flush would read its missing files as deletions of every
    entry it owns, so it decided nothing."""

    code = -32254
    name = "projection.place_replaced"
    module = "projection"
    next_step = "hydrate the folder again (`till project hydrate`), then redo the run's edits"
