"""Public errors of sync (module "sync"; shared codes: conflict, busy, not_found, integrity).

Apart from the engine so that verbs can name them in their contracts without importing it.
"""

from __future__ import annotations

from tillage.errors import BusyError, ConflictError, IntegrityError, NotFoundError, TillageError

__all__ = [
    "LeaseDamagedError",
    "LeaseExpiredError",
    "LeaseHeldError",
    "NotARemoteError",
    "OldFormatError",
    "PullFirstError",
    "RefMissingError",
    "RemoteExistsError",
    "RollbackError",
    "UnknownRemoteError",
]


class PullFirstError(ConflictError):
    """The remote's ref moved to a snapshot this machine has not seen: pushing would replace
    someone's newer work. Nothing was pushed."""

    name = "sync.pull_first"
    module = "sync"
    next_step = "run `till sync --pull` (and `till merge --snapshot ID` if it diverged), then push"


class LeaseHeldError(BusyError):
    """Another machine holds the ref's lease (it is pushing): one writer per ref."""

    name = "sync.lease_held"
    module = "sync"
    next_step = "try again when its push is done, or push to another --ref"


class LeaseExpiredError(ConflictError):
    """The ref's lease belongs to another machine and expired (a push that never finished)."""

    code = -32294
    name = "sync.lease_expired"
    module = "sync"
    next_step = (
        "if that machine is gone, take the ref over with `till sync --push --takeover --yes`"
    )


class RefMissingError(NotFoundError):
    """Nothing was ever pushed to this ref of the remote."""

    name = "sync.ref_missing"
    module = "sync"
    next_step = "push to it first (`till sync --push`), or list its refs with `till remote refs`"


class UnknownRemoteError(NotFoundError):
    """This workspace has no remote of that name."""

    name = "sync.unknown_remote"
    module = "sync"
    next_step = "add one with `till remote add URL`, or list them with `till remote list`"


class RemoteExistsError(ConflictError):
    """This workspace already has a remote of that name (with another URL)."""

    name = "sync.remote_exists"
    module = "sync"
    next_step = "give another --name, or use the one there (`till remote list`)"


class NotARemoteError(TillageError):
    """The URL holds something, but not a tillage remote (no key check at its root)."""

    code = -32295
    name = "sync.not_a_remote"
    module = "sync"
    next_step = "give the URL `till remote add` printed, or an empty place for a new remote"


class LeaseDamagedError(IntegrityError):
    """The ref's lease on the remote does not open (or is no lease of that ref): no machine
    can renew it, so it holds nobody; a push takes it only when asked to."""

    name = "sync.lease_damaged"
    module = "sync"
    next_step = "take the ref's lease over with `till sync --push --takeover --yes`"


class RollbackError(TillageError):
    """The remote's ref is older than this machine saw it (a lower version, another snapshot
    at the same version, or gone): the remote was rolled back or replaced. Nothing was
    changed here or on the remote."""

    code = -32301
    name = "sync.rollback"
    module = "sync"
    next_step = (
        "if the remote was restored on purpose, repeat with --accept-rollback; otherwise put "
        "the newer head back (push from a machine that holds it)"
    )


class OldFormatError(TillageError):
    """The remote was written in storage format 1 (one object per file, readable by its
    sizes and counts), which this tillage neither reads nor writes. Nothing was changed."""

    code = -32296
    name = "sync.old_format"
    module = "sync"
    next_step = (
        "push to a new place in format 2: `till remote add NEW-PLACE --name NEW`, then "
        "`till sync --push --remote NEW` from a machine that holds the work (and clone from "
        "there); remove the old place once every machine moved"
    )
