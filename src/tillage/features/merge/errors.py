"""Public errors of `till merge` (module range -32190..-32209, shared codes first).

Apart from the feature code so that the verb can name them in its contract without importing
the merge machinery (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError, TillageError


class MergeRequestError(InvalidArgumentError):
    """A merge names both a fork and a snapshot, or neither."""

    name = "merge.bad_request"
    module = "merge"
    next_step = "give a fork's NAME, or --snapshot ID (with --base ID when needed), not both"


class NoCommonAncestorError(InvalidArgumentError):
    """`merge --snapshot` found no snapshot both sides descend from."""

    name = "merge.no_common_ancestor"
    module = "merge"
    next_step = "name the common ancestor with --base ID"


class StalePreviewError(TillageError):
    """`merge --expect DIGEST`: the plan is no longer the one previewed with that digest (either
    side changed a path the merge touches, or the fork's base moved)."""

    code = -32191
    name = "merge.stale_preview"
    module = "merge"
    next_step = "preview it again with `till merge NAME --dry-run` and apply its new digest"


class MergeUnsettledError(TillageError):
    """The fork still holds what a `merge --into-fork` left in conflict: a file with conflict
    markers, or a path only `--take` settles. Nothing was landed."""

    code = -32192
    name = "merge.unsettled"
    module = "merge"
    next_step = (
        "remove the conflict markers in the fork's files, settle the rest with "
        "`till merge NAME --take ours|theirs PATH`, then merge again"
    )
