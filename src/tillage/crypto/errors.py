"""Public errors of the sync's crypto (module "sync"), apart so verbs can name them cheaply.

A recovery key that opens nothing, or a sealed object that was altered, answers the shared
`integrity` code (IntegrityError); only a malformed key has a code of its own.
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError

__all__ = ["BadKeyError"]


class BadKeyError(InvalidArgumentError):
    """A recovery key that is not 64 hex characters. The message never echoes what was given:
    a near-miss of a key is almost the key."""

    code = -32293
    name = "sync.bad_key"
    module = "sync"
    next_step = (
        "give the 64-hex-character recovery key `till remote add` printed (--key or "
        "TILLAGE_RECOVERY_KEY)"
    )
