"""Public errors of claims (shared codes: conflict, not_found, invalid_argument).

Apart from the claim machinery so that the verbs can name them in their contracts without
importing it (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.core.globs import BadPatternError
from tillage.errors import ConflictError, InvalidArgumentError, NotFoundError

__all__ = [
    "BadOwnerError",
    "BadPatternError",
    "BadTtlError",
    "ClaimHeldError",
    "ClaimNotFoundError",
    "ClaimNotOwnerError",
]


class ClaimHeldError(ConflictError):
    """A live claim of another owner covers a path the new claim would cover: nothing was
    claimed. `details` names the holder, its claim, its pattern and when it expires."""

    name = "claim.held"
    module = "claims"
    next_step = (
        "wait for the holder to release it (with `till release`) or for it to expire, or claim "
        "another path"
    )


class ClaimNotOwnerError(ConflictError):
    """The claim belongs to another owner: only its owner releases it (it expires by itself)."""

    name = "claim.not_owner"
    module = "claims"
    next_step = "run `till claims` to see the owners, then release it as the owner that took it"


class ClaimNotFoundError(NotFoundError):
    """No live claim has this ID: it never existed, was released, or expired."""

    name = "claim.not_found"
    module = "claims"
    next_step = "list the live claims with `till claims`"


class BadTtlError(InvalidArgumentError):
    """A claim's time to live is not a whole number of seconds between 1 and the maximum."""

    name = "claim.bad_ttl"
    module = "claims"
    next_step = "give --ttl-seconds between 1 and 2592000 (30 days); the default is 3600"


class BadOwnerError(InvalidArgumentError):
    """A claim's owner is empty or too long: claims are told apart by owner."""

    name = "claim.bad_owner"
    module = "claims"
    next_step = "give --owner a short name for the agent or person (at most 200 characters)"
