"""A workspace's remotes: name, URL, the recovery key and where tillage lives on the far side.

Kept in `<store>/remotes/<workspace>.json`, readable by its owner alone (0600), never in the
publication log: the key must not reach an event, a tool result or a listing. The machine's
own ID (a lease's holder) is `<store>/remotes/machine-id`.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tillage.crypto import RecoveryKey
from tillage.errors import TillageError
from tillage.features.sync.errors import RemoteExistsError, UnknownRemoteError
from tillage.platform.fs import atomic_write
from tillage.platform.locks import file_lock
from tillage.platform.names import random_hex
from tillage.store import control
from tillage.store.errors import ControlFileDamagedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.store.store import Store

DEFAULT_NAME = "origin"


@dataclass(frozen=True)
class RemoteConfig:
    """One remote of a workspace. `key` is the secret: never printed but by `remote add`."""

    name: str
    url: str
    key: RecoveryKey
    remote_till: str | None = None
    # The S3 endpoint the environment named at `remote add`: every later process uses it,
    # whatever its own environment says (a push must reach the store the add probed).
    endpoint: str | None = None

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The environment its transport opens with (`--remote-till` wins over the variable;
        the recorded endpoint over the environment's)."""
        if self.remote_till:
            env = {**env, "TILLAGE_REMOTE_TILL": self.remote_till}
        if self.endpoint:
            env = {**env, "TILLAGE_S3_ENDPOINT": self.endpoint}
            if self.endpoint.startswith("http://"):
                env["TILLAGE_S3_ALLOW_HTTP"] = "1"  # allowed when the remote was added
        return env


def _folder(store: Store) -> Path:
    folder = store.home / "remotes"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _path(store: Store, workspace_id: str) -> Path:
    return _folder(store) / f"{workspace_id}.json"


def load(store: Store, workspace_id: str) -> list[RemoteConfig]:
    """The workspace's remotes, in the order they were added."""
    path = _path(store, workspace_id)
    doc = control.read_json(path)
    if doc is None:
        return []
    try:
        return [
            RemoteConfig(
                _text(r["name"]),
                _text(r["url"]),
                RecoveryKey.from_hex(_text(r["key"])),
                _text_or_none(r.get("remote_till")),
                _text_or_none(r.get("endpoint")),
            )
            for r in doc["remotes"]
        ]
    except (KeyError, TypeError, ValueError, AttributeError, TillageError):
        raise ControlFileDamagedError.of(
            path, "its remotes are not in the shape tillage wrote"
        ) from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _text_or_none(value: object) -> str | None:
    return None if value is None else _text(value)


def find(store: Store, workspace_id: str, name: str | None) -> RemoteConfig:
    """The remote called `name` (or, with no name, the only one or `origin`)."""
    remotes = load(store, workspace_id)
    if name is None:
        if len(remotes) == 1:
            return remotes[0]
        name = DEFAULT_NAME
    for remote in remotes:
        if remote.name == name:
            return remote
    raise UnknownRemoteError(f"this workspace has no remote called {name!r}")


def add(store: Store, workspace_id: str, config: RemoteConfig) -> bool:
    """Records a remote; False when the same one was there already. The same name and URL
    with another key (the remote was rekeyed on another machine) replaces the key: the caller
    has proven that it opens the remote."""
    with file_lock(store.locks_dir / f"remotes-{workspace_id}.lock", what="the remotes"):
        remotes = load(store, workspace_id)
        for i, remote in enumerate(remotes):
            if remote.name == config.name:
                if remote.url != config.url:
                    raise RemoteExistsError(
                        f"this workspace already has a remote called {config.name!r} ({remote.url})"
                    )
                if remote == config:
                    return False
                # The same remote with a new key (it was rekeyed elsewhere; the caller proved
                # the key opens it) or a new endpoint: recorded in place.
                remotes[i] = config
                _save(store, workspace_id, remotes)
                return True
        remotes.append(config)
        _save(store, workspace_id, remotes)
        return True


def _save(store: Store, workspace_id: str, remotes: list[RemoteConfig]) -> None:
    doc = {
        "remotes": [
            {
                "name": r.name,
                "url": r.url,
                "key": r.key.hex(),
                "remote_till": r.remote_till,
                "endpoint": r.endpoint,
            }
            for r in remotes
        ]
    }
    atomic_write(_path(store, workspace_id), json.dumps(doc).encode(), mode=0o600)


def replace_key(store: Store, workspace_id: str, name: str, key: RecoveryKey) -> RemoteConfig:
    """Records a remote's new recovery key (after `remote rekey` proved it opens it)."""
    import dataclasses

    with file_lock(store.locks_dir / f"remotes-{workspace_id}.lock", what="the remotes"):
        remotes = load(store, workspace_id)
        for i, remote in enumerate(remotes):
            if remote.name == name:
                remotes[i] = dataclasses.replace(remote, key=key)
                _save(store, workspace_id, remotes)
                return remotes[i]
    raise UnknownRemoteError(f"this workspace has no remote called {name!r}")


def machine_id(store: Store) -> str:
    """This store's stable random ID: the holder a lease names."""
    path = _folder(store) / "machine-id"
    found = control.read_text(path)
    if found is None:
        with file_lock(store.locks_dir / "machine-id.lock", what="the machine ID"):
            found = control.read_text(path)
            if found is None:
                found = random_hex(16)
                atomic_write(path, (found + "\n").encode(), mode=0o600)
    if not found or not found.isprintable():
        raise ControlFileDamagedError.of(path, "it holds no machine ID")
    return found


def forget_remotes(store: Store, workspace_id: str) -> None:
    """Drops a purged workspace's remotes, keys included (what it pushed stays on them)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(store, workspace_id))
