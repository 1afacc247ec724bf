"""The recovery key in a file: how a person gives it without argv (seen by `ps`, kept in shell
history) or the environment (read by every child). The file holds the 64 hex characters
(surrounding blanks forgiven), and it is read only when it is a regular file owned by this
user with no group or other permission bits (0600 or 0400), as ssh treats a private key.

A new key is written whole to a temporary file (0600) in the same folder, then linked to its
name: the name never shows a partial key, and a file already there is never replaced.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from tillage.crypto.errors import (
    BadKeyError,
    KeyFileMissingError,
    KeyFileTakenError,
    KeyFileUnsafeError,
)
from tillage.crypto.keys import RecoveryKey
from tillage.errors import echo
from tillage.platform.fs import fsync_dir, temp_name, write_all

MAX_BYTES = 4096  # a key file is 65 bytes; more is not a key file


def read_key_file(path: Path) -> RecoveryKey:
    """The key in `path`. KeyFileMissingError when there is none or it cannot be read,
    KeyFileUnsafeError when others could read or replace it (nothing is read then),
    BadKeyError when it holds no key (never echoing what it holds)."""
    shown = echo(str(path))
    try:
        # O_NONBLOCK: a FIFO put there cannot hang the command; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise KeyFileMissingError(f"there is no key file at {shown}") from None
    except OSError as exc:
        raise KeyFileMissingError(
            f"the key file {shown} cannot be read: {(exc.strerror or str(exc)).lower()}"
        ) from None
    try:
        _check_private(fd, path)
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return RecoveryKey.from_hex(data.decode("ascii", "replace"))
    except BadKeyError as exc:
        raise BadKeyError(
            f"the key file {shown} holds no recovery key: {exc.message}",
            next_step="it must hold the 64 hex characters `till remote add` wrote, nothing else",
        ) from None


def _check_private(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    shown = echo(str(path))
    fix = f"chmod 600 {shlex.quote(str(path))}"
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileUnsafeError(
            f"the key file {shown} is not a regular file",
            next_step="name the file itself (a regular file, chmod 600)",
        )
    if st.st_uid != os.geteuid():
        raise KeyFileUnsafeError(
            f"the key file {shown} belongs to another user",
            next_step=f"copy it to a file of your own, then {fix}",
        )
    if st.st_mode & 0o077:
        mode = stat.S_IMODE(st.st_mode)
        raise KeyFileUnsafeError(
            f"the key file {shown} can be read or changed by others (mode {mode:04o})",
            next_step=fix,
        )


def write_key_file(path: Path, key: RecoveryKey) -> None:
    """Writes `key` to the new file `path` (0600), durably; KeyFileTakenError when something
    is there already (never replaced) or the folder cannot take it."""
    shown = echo(str(path))
    folder = path.parent
    tmp = folder / temp_name(path.name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise KeyFileTakenError(
            f"cannot write a key file in {echo(str(folder))}: {(exc.strerror or str(exc)).lower()}"
        ) from None
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            write_all(fd, (key.hex() + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise KeyFileTakenError(
                f"{shown} exists already: a key file is never replaced"
            ) from None
        except OSError as exc:
            raise KeyFileTakenError(
                f"cannot write the key file {shown}: {(exc.strerror or str(exc)).lower()}"
            ) from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(folder)


def remove_key_file(path: Path) -> None:
    """Removes a key file this command wrote, when what it was for failed."""
    try:
        path.unlink()
        fsync_dir(path.parent)
    except OSError:
        pass
