"""`till clone`: a new folder from a remote's ref. The key, the ref and every object are
checked before anything is made here; then the folder is attached, given the remote as
`origin`, and the ref is pulled into it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tillage.crypto import RecoveryKey
from tillage.errors import InvalidArgumentError
from tillage.features.sync import engine, remotes, seen
from tillage.features.sync.errors import RefMissingError
from tillage.features.sync.refs import doc_key
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace, attach
from tillage.workspace.seal import SealOptions, seal


def clone(
    *,
    home: Path,
    user_home: Path | None,
    folder: Path,
    env: Mapping[str, str],
    url: str,
    key: RecoveryKey,
    ref: str,
    dest: str | None,
    remote_till: str | None,
    accept_rollback: bool = False,
) -> tuple[Workspace, SnapshotRow]:
    """Clones `ref` of `url` into `dest` (default: the remote's last path segment, below
    `folder`); returns the new workspace and its head, the pulled state."""
    name = dest or url.rstrip("/").rsplit("/", 1)[-1] or "clone"
    target = Path(name) if Path(name).is_absolute() else folder / name
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidArgumentError(
            f"{target} exists and is not empty", next_step="give an empty or new DEST"
        )
    config = remotes.RemoteConfig("origin", url, key, remote_till)
    remote = engine.open_for(config, env, str(folder))
    try:  # the key, the ref and every object are checked before anything is made here
        opened = engine.ensure_config(remote, key, create=False)
        current = engine.read_ref(remote, doc_key(opened), ref)
        if current is None:
            raise RefMissingError(f"nothing was pushed to ref {ref!r} of {url}")
        with Store.open(home) as store, store.sharing():
            # A store that saw this remote's ref refuses an older one (sync.rollback).
            seen.trust(store, remote, ref, current, url, accept_rollback=accept_rollback)
            engine.download(store, remote, opened, current.snapshot)
        # The S3 endpoint this clone reached is the one origin keeps (as `remote add` does).
        endpoint = getattr(remote, "recorded_endpoint", None)
        config = replace(config, endpoint=endpoint if isinstance(endpoint, str) else None)
    finally:
        remote.close()
    target.mkdir(parents=True, exist_ok=True)
    ws = attach(home, target, user_home).workspace
    seal(ws, SealOptions(trigger="initial"))
    remotes.add(ws.store, ws.id, config)
    pulled = engine.pull(
        ws, config, env, str(target), ref, bootstrap=True, accept_rollback=accept_rollback
    )
    assert pulled.local is not None
    return ws, pulled.local
