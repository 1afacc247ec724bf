"""Where a verb that takes the recovery key (`remote add`, `clone`, `work`, ...) finds it, one
way for all of them: `--key HEX`, else `--key-file PATH`, else TILLAGE_RECOVERY_KEY_FILE, else
TILLAGE_RECOVERY_KEY, else (a person at a terminal, not --json) a prompt that does not echo.
Giving both `--key` and `--key-file` is refused: which one was meant is not ours to guess.

A `till` process given the key or its file in argv or environ has handed them to its own
re-execution (platform/keyhandoff.py): there `--key`/`--key-file` read HIDDEN and the
variables are gone, and what they held comes from `handed()` instead, in the same place of
the order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tillage.crypto import BadKeyError, RecoveryKey
from tillage.errors import InvalidArgumentError
from tillage.platform import keyhandoff
from tillage.platform.homes import expand_user

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.verbs.invoke import Context

KEY_VARIABLE = keyhandoff.VARIABLE
FILE_VARIABLE = "TILLAGE_RECOVERY_KEY_FILE"
# How every message and printed command tells a person to give the key (never `--key HEX`).
HOW = f"give --key-file PATH (a file holding the key, chmod 600) or set {FILE_VARIABLE}"


@dataclass(frozen=True)
class GivenKey:
    """A key the caller gave and how: `flag` (--key), `file` (`path` names it: --key-file or
    TILLAGE_RECOVERY_KEY_FILE), `env` (TILLAGE_RECOVERY_KEY) or `prompt`."""

    key: RecoveryKey
    source: str
    path: Path | None = None


def key_path(ctx: Context, text: str) -> Path:
    """A key file's path as given: `~` against the caller's home, a relative one against the
    folder the command is about (as --destination is)."""
    path = Path(expand_user(text, ctx.settings.env))
    return path if path.is_absolute() else ctx.settings.folder / path


def _flag(ctx: Context, value: str, origin: str, flag: str) -> str:
    """A flag's value as given, or the one handed over when it reads HIDDEN."""
    if value != keyhandoff.HIDDEN:
        return value
    handed = keyhandoff.handed(origin) if ctx.settings.own_process else None
    if handed is None:
        raise BadKeyError(
            f"what {flag} gave did not reach this process (its handoff failed)", next_step=HOW
        )
    return handed


def _variable(ctx: Context, name: str, origin: str) -> str | None:
    """A variable as the caller set it, or as it was handed over (own process only)."""
    value = ctx.settings.env.get(name)
    if value is None and ctx.settings.own_process:
        value = keyhandoff.handed(origin)
    return value


def named_file(ctx: Context, key: str | None, key_file: str | None) -> Path | None:
    """The key file the caller names (--key-file, else TILLAGE_RECOVERY_KEY_FILE unless --key
    was given), whether or not it exists; InvalidArgumentError for --key with --key-file."""
    if key is not None and key_file is not None:
        raise InvalidArgumentError(
            "give the key one way: --key or --key-file, not both",
            next_step="keep --key-file PATH (a key in argv is seen by `ps` and kept in history)",
        )
    if key is not None:
        return None
    if key_file is not None and not key_file.strip():
        raise InvalidArgumentError(
            "--key-file names no file", next_step="give the key file's path: --key-file PATH"
        )
    text = (
        _flag(ctx, key_file, "key_file", "--key-file")
        if key_file is not None
        else _variable(ctx, FILE_VARIABLE, "env_file")
    )
    return key_path(ctx, text) if text else None


def key_from(ctx: Context, key: str | None, key_file: str | None) -> GivenKey | None:
    """The key the caller gave, by the order above short of the prompt; None when none was
    given. A named key file must exist (KeyFileMissingError) and be private
    (KeyFileUnsafeError); a malformed key is BadKeyError, never echoed."""
    from tillage.crypto.keyfile import read_key_file

    path = named_file(ctx, key, key_file)
    if key is not None:
        return GivenKey(RecoveryKey.from_hex(_flag(ctx, key, "key", "--key")), "flag")
    if path is not None:
        return GivenKey(read_key_file(path), "file", path)
    exported = _variable(ctx, KEY_VARIABLE, "env")
    if exported:
        return GivenKey(RecoveryKey.from_hex(exported), "env")
    return None


def required_key(ctx: Context, key: str | None, key_file: str | None, needed_by: str) -> GivenKey:
    """The key the caller gave (key_from), else the one a person types at the prompt (only
    at a terminal, never under --json); BadKeyError saying how to give it otherwise."""
    found = key_from(ctx, key, key_file)
    if found is not None:
        return found
    ask = ctx.settings.ask_secret
    if ask is not None:
        text = ask(f"Recovery key for {needed_by} (64 hex, not shown): ")
        if text and text.strip():
            return GivenKey(RecoveryKey.from_hex(text), "prompt")
    raise BadKeyError(f"{needed_by} needs the remote's recovery key", next_step=HOW)


@dataclass(frozen=True)
class RemoteKey:
    """The key `remote add` uses: given (`generated` false), or new; `written` names the file
    a new key was written to (--key-file naming no file yet, else one in the store's
    `keys/` folder), before the remote is made with it."""

    key: RecoveryKey
    generated: bool
    written: Path | None


def remote_add_key(ctx: Context, key: str | None, key_file: str | None, name: str) -> RemoteKey:
    """`remote add`'s key: the one given (key_from), else a new one written to --key-file
    when that names no file yet, else a new one written to `<store>/keys/NAME-FP.key` (FP:
    the key's fingerprint), so a person never has to copy it from the screen or pass it in
    argv. Written before the remote is made: a key that opens a remote is never lost."""
    import os

    from tillage.crypto.keyfile import write_key_file

    fresh = None
    if key is None and key_file is not None:
        path = named_file(ctx, key, key_file)
        fresh = None if path is None or os.path.lexists(path) else path
    found = key_from(ctx, key, key_file) if fresh is None else None
    if found is not None:
        return RemoteKey(found.key, False, None)
    made = RecoveryKey.generate()
    if fresh is None:
        keys = ctx.settings.home / "keys"
        keys.mkdir(mode=0o700, parents=True, exist_ok=True)
        fresh = keys / f"{name}-{made.fingerprint}.key"
    write_key_file(fresh, made)
    return RemoteKey(made, True, fresh)
