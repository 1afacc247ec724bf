"""Public errors of agent sessions (shared codes: not_found, ambiguous, invalid_argument).

Apart from the session machinery so that the verbs can name them in their contracts without
importing it (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import AmbiguousError, InvalidArgumentError, NotFoundError

__all__ = [
    "BadCleanupLimitError",
    "BadCommitIdError",
    "BadDescriptionError",
    "BadSessionIdError",
    "CommitAmbiguousError",
    "CommitNotFoundError",
]


class CommitNotFoundError(NotFoundError):
    """No commit of this workspace's sessions has this ID (or it was removed by cleanup)."""

    name = "session.commit_not_found"
    module = "sessions"
    next_step = (
        "list a session's commits with `till session log SESSION` (`till sessions` names them)"
    )


class CommitAmbiguousError(AmbiguousError):
    """A commit ID prefix matches more than one commit of this workspace's sessions."""

    name = "session.commit_ambiguous"
    module = "sessions"
    next_step = "give more characters of the commit ID (see `till session log SESSION`)"


class BadCommitIdError(InvalidArgumentError):
    """A commit reference is not hex, or shorter than 6 characters or longer than 64."""

    name = "session.bad_commit_id"
    module = "sessions"
    next_step = "give a commit ID or a unique prefix of at least 6 hex characters"


class BadSessionIdError(InvalidArgumentError):
    """A session ID is empty, longer than 200 characters, or holds control characters:
    nothing was sealed or recorded."""

    name = "session.bad_id"
    module = "sessions"
    next_step = "name the session with printable text of 1 to 200 characters (a UUID works)"


class BadDescriptionError(InvalidArgumentError):
    """A commit description is longer than 4096 characters or not valid text."""

    name = "session.bad_description"
    module = "sessions"
    next_step = "give a shorter description with -m (at most 4096 characters)"


class BadCleanupLimitError(InvalidArgumentError):
    """A cleanup limit is negative."""

    name = "session.bad_limit"
    module = "sessions"
    next_step = "give --max-age-days and --max-sessions as whole numbers of 0 or more"
