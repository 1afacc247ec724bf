"""Public errors of the sync's crypto (module "sync"), apart so verbs can name them cheaply.

A recovery key that opens nothing, or a sealed object that was altered, answers the shared
`integrity` code (IntegrityError); only a malformed key has a code of its own.
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError

__all__ = ["BadKeyError", "KeyFileMissingError", "KeyFileTakenError", "KeyFileUnsafeError"]


class BadKeyError(InvalidArgumentError):
    """A recovery key that is not 64 hex characters. The message never echoes what was given:
    a near-miss of a key is almost the key."""

    code = -32293
    name = "sync.bad_key"
    module = "sync"
    next_step = (
        "give the recovery key `till remote add` wrote: --key-file PATH (or "
        "TILLAGE_RECOVERY_KEY_FILE)"
    )


class KeyFileUnsafeError(InvalidArgumentError):
    """A key file that another user could read or replace: not a regular file, not owned by
    this user, or with group or other permission bits. It is not read."""

    code = -32305
    name = "sync.key_file_unsafe"
    module = "sync"
    next_step = "make it yours and private: chmod 600 PATH"


class KeyFileMissingError(InvalidArgumentError):
    """No key file where one was named (--key-file, TILLAGE_RECOVERY_KEY_FILE), or one that
    cannot be read."""

    code = -32306
    name = "sync.key_file_missing"
    module = "sync"
    next_step = (
        "copy the key file `till remote add --key-file PATH` wrote to this machine (chmod 600), "
        "or name the right one"
    )


class KeyFileTakenError(InvalidArgumentError):
    """A new key could not be written where --key-file named: something appeared there, or its
    folder is missing or not writable. No remote was added."""

    code = -32307
    name = "sync.key_file_taken"
    module = "sync"
    next_step = "name a new file in a folder you can write, e.g. --key-file ~/project.tillage-key"
