"""A remote as a repository (format 2): its master key, key files and `config`; made, opened,
told apart from a place that is not one, and given a new recovery key.

    keys/<keyed name of a recovery key>   the master key, sealed under that recovery key
    config                                 sealed under the master key: {kind, format: 2, repo}

Opening reads the key file the recovery key names (none: a wrong key, `integrity`, told before
anything else is read), then `config`. Making one writes the key file and then `config`, last,
after every probe: `config` is what says "a remote is here", so a refused or cut `remote add`
leaves no remote behind. A format-1 remote (`objects/`, its `config` a key check under the
recovery key itself) is refused with `sync.old_format`, naming the way out.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tillage.crypto import (
    MasterKey,
    RecoveryKey,
    key_file_name,
    open_document,
    open_key_file,
    seal_document,
    seal_key_file,
    verify_key_check,
)
from tillage.errors import ConflictError, IntegrityError
from tillage.features.sync.errors import NotARemoteError, OldFormatError
from tillage.platform.names import random_hex
from tillage.remote.errors import RemoteMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.remote.base import Remote

__all__ = [
    "CONFIG",
    "FORMAT",
    "Opened",
    "RemoteOccupiedError",
    "add_place",
    "create",
    "ensure",
    "open_repository",
    "place_state",
    "rekey",
    "retire",
]

CONFIG = "config"
FORMAT = 2
_KIND = "tillage-sync-remote"


@dataclass(frozen=True)
class Opened:
    """A remote whose recovery key opened its master key: what every read and write of its
    data uses. `repo` is the remote's random ID (it names this machine's index cache)."""

    master: MasterKey
    repo: str
    format: int = FORMAT

    @property
    def key_for_documents(self) -> MasterKey:
        """The key refs and leases are named and sealed under (`name_of`, `seal_document`,
        `open_document`): the master key, so a new recovery key opens them unchanged."""
        return self.master


class RemoteOccupiedError(ConflictError):
    """The place already holds a tillage remote, made with another recovery key than the one
    being given (or none was given and a new one would not open it). Nothing was written."""

    name = "sync.remote_occupied"
    module = "sync"
    next_step = (
        "give that remote's own recovery key: --key-file PATH (or TILLAGE_RECOVERY_KEY_FILE); "
        "or choose another place for a new remote"
    )


def _bad_key() -> IntegrityError:
    return IntegrityError(
        "the recovery key does not open this remote",
        next_step=(
            "give this remote's own recovery key, the one written when the remote was made or "
            "last rekeyed: --key-file PATH (or TILLAGE_RECOVERY_KEY_FILE); a workspace whose "
            "remote was rekeyed elsewhere takes the new key with `till remote add URL "
            "--key-file PATH`"
        ),
    )


def _old_format(remote: Remote) -> OldFormatError:
    return OldFormatError(
        f"{remote.url} holds a remote in storage format 1, which this tillage no longer reads "
        "or writes",
        details={"remote": remote.url, "format": 1},
    )


def open_repository(remote: Remote, key: RecoveryKey) -> Opened:
    """Opens the remote with `key`: NotARemoteError when it holds no remote, IntegrityError
    when the key opens nothing (its key file absent or altered, `config` altered),
    OldFormatError for a format-1 remote."""
    try:
        config = remote.get(CONFIG)
    except RemoteMissingError:
        raise NotARemoteError(
            f"{remote.url} holds no tillage remote (no config at its root)",
            next_step="give the URL of a remote made by `till remote add`, or add this place "
            "as a new remote with `till remote add URL`",
        ) from None
    return _open_with(remote, key, config)


def _open_with(remote: Remote, key: RecoveryKey, config: bytes) -> Opened:
    name = key_file_name(key)
    try:
        sealed = remote.get(name)
    except RemoteMissingError:
        with contextlib.suppress(IntegrityError):
            verify_key_check(key, config)  # format 1: its config opens under the recovery key
            raise _old_format(remote) from None
        raise _bad_key() from None
    master = open_key_file(key, sealed)
    doc = open_document(master, CONFIG, config)
    if doc.get("kind") != _KIND or not isinstance(doc.get("repo"), str):
        raise IntegrityError(
            "the remote's config opens but is not a tillage remote's",
            next_step="check that the URL names a tillage remote",
        )
    if doc.get("format") != FORMAT:
        raise IntegrityError(
            f"the remote is in storage format {doc.get('format')!r}, which this tillage does "
            "not know",
            next_step="upgrade tillage on this machine to the version that wrote the remote",
            details={"format": doc.get("format")},
        )
    return Opened(master, doc["repo"])


def place_state(remote: Remote) -> str:
    """What a place holds: "remote" (a `config`), "empty" (nothing at all), "unfinished"
    (only key files: a `remote add` cut before its config) or "other" (anything else)."""
    if remote.exists([CONFIG]):
        return "remote"
    names = _some_names(remote)
    if not names:
        return "empty"
    if all(n.startswith("keys/") for n in names):
        return "unfinished"
    return "other"


def _some_names(remote: Remote) -> list[str]:
    """Names a place holds (some of them, or all). A folder's own entries (dot-files too: a
    `.git` is not an empty place) are looked at directly, and an S3 prefix by one listing
    page, without walking a big tree."""
    import os

    first = getattr(remote, "first_names", None)
    if first is not None:
        names = first(100)
        return names if isinstance(names, list) else []
    root = getattr(remote, "root", None)
    if root is not None:
        try:
            entries = os.listdir(root)
        except FileNotFoundError:
            return []
        except OSError:
            entries = []
        if any(e != "keys" for e in entries):
            return [*entries, "x"]  # not only key files
        if not entries:
            return []
    return remote.list("")


def create(remote: Remote, key: RecoveryKey) -> Opened:
    """Makes a new remote in an empty place (or finishes one this key began): the key file,
    then `config` last. When another machine made one there first, opens that one instead
    (IntegrityError if `key` does not open it) and removes the key file it wrote."""
    name = key_file_name(key)
    found = remote.read_versioned(name)
    wrote = False
    if found is None:
        master = MasterKey.generate()
        wrote = remote.write_if(name, seal_key_file(key, master), None)
        found = remote.read_versioned(name)
        if found is None:
            raise IntegrityError(f"{remote.url} lost the key file it was just given")
    master = open_key_file(key, found.data)
    repo = random_hex(16)
    doc = {"kind": _KIND, "format": FORMAT, "repo": repo}
    if remote.write_if(CONFIG, seal_document(master, CONFIG, doc), None):
        return Opened(master, repo)
    config = remote.get(CONFIG)  # another machine made the remote first
    try:
        return _open_with(remote, key, config)
    except IntegrityError:
        if wrote:
            remote.delete(name)
        raise


def ensure(remote: Remote, key: RecoveryKey, *, create_missing: bool) -> tuple[Opened, bool]:
    """Opens the remote, or (with `create_missing`) makes it in an empty place. Returns the
    opened remote and whether it was made now. A place holding something else is
    NotARemoteError: tillage never mixes its names into another folder."""
    try:
        config = remote.get(CONFIG)
    except RemoteMissingError:
        if not create_missing:
            return open_repository(remote, key), False  # raises NotARemoteError
        state = place_state(remote)
        if state == "other":
            raise NotARemoteError(
                f"{remote.url} is not empty and holds no tillage remote: tillage will not mix "
                "its files into it",
                next_step="give an empty or new folder (or bucket prefix) for a new remote",
            ) from None
        if state == "unfinished" and remote.read_versioned(key_file_name(key)) is None:
            raise RemoteOccupiedError(
                f"{remote.url} holds a remote that another `remote add` began and never "
                "finished (key files, no config)",
                next_step="choose another place, or remove that folder's keys/ if no `remote "
                "add` is running there",
            ) from None
        return create(remote, key), True
    return _open_with(remote, key, config), False


def rekey(remote: Remote, old: RecoveryKey, new: RecoveryKey) -> Opened:
    """Gives the remote's master key to `new` as well: writes `new`'s key file and proves it
    opens the remote (the same master key). No data is sealed again. `old` still opens it
    until `retire`: the caller records `new` locally in between, so a cut rekey never leaves
    this machine holding a key that opens nothing."""
    opened = open_repository(remote, old)
    if new == old:
        return opened
    name = key_file_name(new)
    existing = remote.read_versioned(name)
    if existing is None:
        remote.write_if(name, seal_key_file(new, opened.master), None)
    reopened = open_repository(remote, new)  # IntegrityError if it does not open: old kept
    if reopened.master != opened.master:
        raise IntegrityError(
            "the new recovery key opens another master key than the remote's",
            next_step="give another new key",
        )
    return reopened


def retire(remote: Remote, old: RecoveryKey) -> None:
    """Removes `old`'s key file: `old` no longer opens the remote."""
    remote.delete(key_file_name(old))


def add_place(remote: Remote, key: RecoveryKey, *, generated: bool) -> str | None:
    """What `remote add` does to the place, probes first and writes last: an S3 store's
    conditional writes are proven (refused when ignored); a place holding a remote is opened
    with `key` (a key generated now cannot open it: RemoteOccupiedError, which never claims a
    key was printed); an empty place gets a new remote; anything else is refused. Returns the
    endpoint to record with the remote (an S3 endpoint the environment named), or None."""
    probe = getattr(remote, "check_conditional_writes", None)
    if probe is not None:
        probe()
    if remote.exists([CONFIG]):
        if generated:
            raise RemoteOccupiedError(
                f"{remote.url} already holds a tillage remote, made with a recovery key of its "
                "own; a new key cannot open it",
            )
        open_repository(remote, key)
    else:
        ensure(remote, key, create_missing=True)
    recorded = getattr(remote, "recorded_endpoint", None)
    return recorded if isinstance(recorded, str) else None
