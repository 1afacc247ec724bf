"""Public errors of `till bisect` (the forks module's range, -32180..-32189, and shared codes).

Apart from the feature code so that the verb can name them in its contract without importing
the probe machinery (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError, TillageError


class BisectRangeError(InvalidArgumentError):
    """The two ends do not make a range to search: the same snapshot, a good end that is not
    an ancestor of the bad one, or a timeline of one snapshot."""

    name = "bisect.bad_range"
    module = "forks"
    next_step = (
        "give --good an older snapshot of the same timeline than --bad (see `till timeline`)"
    )


class BisectGoodFailsError(TillageError):
    """The good end fails the check: there is nothing to search between good and bad."""

    code = -32180
    name = "bisect.good_fails"
    module = "forks"
    next_step = (
        "pass --good a snapshot where the check passes (see `till timeline`), or fix the check"
    )


class BisectBadPassesError(TillageError):
    """The bad end passes the check: nothing between good and bad breaks it."""

    code = -32181
    name = "bisect.bad_passes"
    module = "forks"
    next_step = (
        "pass --bad a snapshot where the check fails (see `till timeline`), or fix the check"
    )


class BisectUntestableEndError(TillageError):
    """The check could not test an end (it exited 125, "skip"): the range cannot be trusted."""

    code = -32182
    name = "bisect.untestable_end"
    module = "forks"
    next_step = "pass --good and --bad snapshots the check can test"


class BisectAbortedError(TillageError):
    """The check exited above 127 or was killed by a signal: like `git bisect run`, the bisect
    stops there (the probes so far are in `details`)."""

    code = -32183
    name = "bisect.aborted"
    module = "forks"
    next_step = "fix the check (exit 0 good, 1-127 bad, 125 skip), then run `till bisect` again"
