"""Public errors of the blackboard (`till coord`): shared codes with their own names, and one
code of the forks range (the blackboard is a family's, as forks are).

Apart from the blackboard's machinery so that the verbs can name them in their contracts
without importing it (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import IntegrityError, InvalidArgumentError, NotFoundError, TillageError


class InvalidKeyError(InvalidArgumentError):
    """A blackboard key is a name, not a file path: 1 to 200 characters, segments of letters,
    digits, '.', '_', '-' and ':' separated by '/', none empty, '.' or '..' (no leading or
    trailing '/')."""

    name = "coord.invalid_key"
    module = "forks"
    next_step = "use a key like `plan` or `tasks/42/result` (a-z, A-Z, 0-9, . _ - : and /)"


class ValueTooBigError(TillageError):
    """The value is over the blackboard's limit (1 MiB): nothing was written. `details` gives
    the limit and the size (or, read from stdin, that it is more)."""

    code = -32167
    name = "coord.too_big"
    module = "forks"
    next_step = (
        "keep large content in the workspace's files and write a short value that names them"
    )


class BadValueError(InvalidArgumentError):
    """No value was given (no --value, no --file, nothing on stdin), or two were, or the file
    named cannot be read: nothing was written."""

    name = "coord.bad_value"
    module = "forks"
    next_step = "give the value with --value V, --file F, or on stdin (`--value ''` is empty)"


class BadOwnerError(InvalidArgumentError):
    """A write needs an owner (--owner, else TILLAGE_AGENT): a short printable name, at most
    200 characters, so `read` can say who wrote a value."""

    name = "coord.bad_owner"
    module = "forks"
    next_step = "pass --owner NAME (or set TILLAGE_AGENT) with a short name for the agent or person"


class KeyNotFoundError(NotFoundError):
    """Nothing was ever written under this key in the family."""

    name = "coord.not_found"
    module = "forks"
    next_step = "list the keys with `till coord list`"


class ValueDamagedError(IntegrityError):
    """A stored value does not match its recorded size or digest (the file was changed or
    damaged outside tillage): its bytes are not served."""

    name = "coord.damaged"
    module = "forks"
    next_step = "write the key again (`till coord write KEY ...`); its history says who wrote it"
