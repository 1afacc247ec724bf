"""Verbs that look after a remote itself: `remote check`, `remote repair`, `remote rekey`.

Check reads and changes nothing; repair only adds packs and an index, then removes what that
index superseded (damaged packs are emptied into new ones first); rekey writes one key file
and removes one, sealing no data again. The new recovery key is shown once, only when rekey
generated it (as `remote add` shows its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tillage.crypto import BadKeyError
from tillage.crypto.errors import KeyFileMissingError, KeyFileTakenError, KeyFileUnsafeError
from tillage.errors import IntegrityError, InvalidArgumentError
from tillage.features.sync.errors import NotARemoteError, OldFormatError, UnknownRemoteError
from tillage.remote.errors import BadRemoteUrlError, RemoteProtocolError, RemoteUnavailableError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from tillage.crypto import RecoveryKey
    from tillage.features.sync.remotes import RemoteConfig
    from tillage.features.sync.repository import Opened
    from tillage.remote.base import Remote

ERRORS = (
    RemoteUnavailableError,
    RemoteProtocolError,
    BadRemoteUrlError,
    NotARemoteError,
    OldFormatError,
    IntegrityError,
    UnknownRemoteError,
)


@dataclass(frozen=True)
class RemoteProblem:
    object: str
    problem: str


def _opened(ctx: Context, name: str | None) -> tuple[RemoteConfig, Remote, Opened]:
    from tillage.features.sync import remotes, repository
    from tillage.features.sync.engine import open_for

    ws = ctx.workspace
    config = remotes.find(ws.store, ws.id, name)
    remote = open_for(config, ctx.settings.env, str(ctx.settings.folder))
    try:
        return config, remote, repository.open_repository(remote, config.key)
    except BaseException:
        remote.close()
        raise


# -- check --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteCheckRequest:
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)
    read_data: bool = param(
        "read every pack whole and prove every blob against its ID (slow: reads everything)",
        default=False,
    )


@dataclass(frozen=True)
class RemoteCheckResult:
    ok: bool
    remote: str
    packs: int
    blobs: int
    refs: int
    unindexed_packs: int
    problems: tuple[RemoteProblem, ...]

    def exit_status(self) -> int:
        """A remote that is not ok is a failed check: exit 1, with this document (as verify)."""
        return 0 if self.ok else 1


def remote_check(ctx: Context, req: RemoteCheckRequest) -> RemoteCheckResult:
    from tillage.features.sync import remote_index
    from tillage.features.sync.check import check

    config, remote, opened = _opened(ctx, req.remote)
    try:
        cache = remote_index.cache_folder(ctx.workspace.store.home, opened.repo)
        report = check(remote, opened.master, cache, read_data=req.read_data)
    finally:
        remote.close()
    return RemoteCheckResult(
        ok=report.ok,
        remote=config.name,
        packs=report.packs,
        blobs=report.blobs,
        refs=report.refs,
        unindexed_packs=report.unindexed_packs,
        problems=tuple(RemoteProblem(p.object, p.problem) for p in report.problems),
    )


# -- repair -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteRepairRequest:
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)
    read_data: bool = param(
        "find damaged packs by reading every one whole (else by their trailers)", default=False
    )


@dataclass(frozen=True)
class Unrepairable:
    object: str
    ref: str
    pushed_by: str | None
    # True when the machine that pushed the ref is this one (its store lost the object too).
    this_machine: bool


@dataclass(frozen=True)
class RemoteRepairResult:
    ok: bool
    remote: str
    problems: tuple[RemoteProblem, ...]
    salvaged_objects: int
    resent_objects: int
    reindexed_packs: int
    removed_packs: int
    removed_indexes: int
    unrepaired: tuple[Unrepairable, ...]
    # With unrepaired objects: what to run, and where.
    next: str | None = field(default=None, metadata={"omit_none": True})

    def exit_status(self) -> int:
        """Something left unrepaired: exit 1, with this document."""
        return 0 if self.ok else 1


def remote_repair(ctx: Context, req: RemoteRepairRequest) -> RemoteRepairResult:
    from tillage.features.sync import remote_index
    from tillage.features.sync.check import repair
    from tillage.features.sync.remotes import machine_id

    config, remote, opened = _opened(ctx, req.remote)
    store = ctx.workspace.store
    try:
        cache = remote_index.cache_folder(store.home, opened.repo)
        report = repair(store, remote, opened.master, cache, read_data=req.read_data)
    finally:
        remote.close()
    me = machine_id(store)
    lost = tuple(
        Unrepairable(u.object, u.ref, u.pushed_by, u.pushed_by == me) for u in report.unrepaired
    )
    advice = None
    if lost:
        advice = (
            "run `till remote repair` on a machine whose store holds these objects: the one "
            "that pushed the ref (`pushed_by`, its `till` store's remotes/machine-id) or any "
            "that pulled it"
        )
    return RemoteRepairResult(
        ok=report.ok,
        remote=config.name,
        problems=tuple(RemoteProblem(p.object, p.problem) for p in report.problems),
        salvaged_objects=report.salvaged_objects,
        resent_objects=report.resent_objects,
        reindexed_packs=report.reindexed_packs,
        removed_packs=report.removed_packs,
        removed_indexes=report.removed_indexes,
        unrepaired=lost,
        next=advice,
    )


# -- rekey --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteRekeyRequest:
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)
    new_key: str | None = param(
        "the new recovery key (64 hex; seen by `ps`: prefer --new-key-file)",
        default=None,
        metavar="HEX",
    )
    new_key_file: str | None = param(
        "a file holding the new key (chmod 600); when there is no file there, a new key is "
        "generated and written to it (0600)",
        default=None,
        metavar="PATH",
    )


@dataclass(frozen=True)
class RemoteRekeyResult:
    remote: str
    # Present only when it was generated now, and not into the file --new-key-file named: for
    # the caller to keep (as `remote add` answers its own).
    key: str | None = field(default=None, metadata={"omit_none": True})
    # Where the key generated now was written (0600): --new-key-file, or the store's keys/.
    key_file: str | None = field(default=None, metadata={"omit_none": True})


def _new_key(ctx: Context, req: RemoteRekeyRequest, name: str) -> tuple[RecoveryKey, Path | None]:
    """The new key and the file it was written to now (None: given, not made): --new-key, a
    --new-key-file that exists, else a new key written to --new-key-file or to
    `<store>/keys/NAME-FP.key` (as `remote add` keeps the keys it makes). Never the
    environment's TILLAGE_RECOVERY_KEY*: those name the key being replaced."""
    import os

    from tillage.crypto import RecoveryKey
    from tillage.crypto.keyfile import read_key_file, write_key_file
    from tillage.verbs.keys import key_path

    if req.new_key is not None and req.new_key_file is not None:
        raise InvalidArgumentError(
            "give the new key one way: --new-key or --new-key-file, not both",
            next_step="keep --new-key-file PATH (a key in argv is seen by `ps`)",
        )
    if req.new_key is not None:
        return RecoveryKey.from_hex(req.new_key), None
    path = key_path(ctx, req.new_key_file) if req.new_key_file else None
    if path is not None and os.path.lexists(path):
        return read_key_file(path), None
    made = RecoveryKey.generate()
    if path is None:
        keys = ctx.settings.home / "keys"
        keys.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = keys / f"{name}-{made.fingerprint}.key"
    write_key_file(path, made)
    return made, path


def remote_rekey(ctx: Context, req: RemoteRekeyRequest) -> RemoteRekeyResult:
    from tillage.crypto.keyfile import remove_key_file
    from tillage.features.sync import remotes, repository

    config, remote, _opened_now = _opened(ctx, req.remote)
    ws = ctx.workspace
    written: Path | None = None
    try:
        new, written = _new_key(ctx, req, config.name)
        if new == config.key:
            raise InvalidArgumentError(
                "the new recovery key is the one this remote has now",
                next_step="give another new key, or none to have one generated",
            )
        repository.rekey(remote, config.key, new)  # the new key file, proven to open it
        remotes.replace_key(ws.store, ws.id, config.name, new)  # kept here before the old goes
    except BaseException:
        if written is not None:
            remove_key_file(written)  # it opens nothing: a retry makes another
        remote.close()
        raise
    try:
        repository.retire(remote, config.key)
    finally:
        remote.close()
    shown = written is not None and req.new_key_file is None
    return RemoteRekeyResult(
        remote=config.name,
        key=new.hex() if shown else None,
        key_file=str(written) if written is not None else None,
    )


# Any: each verb has its own request and result types.
VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="remote.check",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.READ,
            request=RemoteCheckRequest,
            result=RemoteCheckResult,
            cli="remote check",
            errors=ERRORS,
            doc="Check a remote: every index opens, every pack an index names is there and "
            "whole (its sealed trailer, one ranged read a pack; with --read-data every blob "
            "read and proven against its ID), every ref's head closure is indexed. Answers "
            "`ok`, `packs`, `blobs`, `refs`, `unindexed_packs` (a cut push's, adopted by the "
            "next push) and `problems` (`{object, problem}`); exits 1 when not ok. Changes "
            "nothing.",
        ),
        remote_check,
    ),
    Verb(
        Contract(
            name="remote.repair",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=RemoteRepairRequest,
            result=RemoteRepairResult,
            cli="remote repair",
            errors=ERRORS,
            doc="Repair a remote: every blob still readable in a damaged pack is copied into a "
            "new pack, what the refs' heads lack is sent from this machine's store, one new "
            "index names every good pack, and only then the indexes it supersedes and the "
            "emptied damaged packs are removed (it adds and supersedes; nothing readable is "
            "lost, so it asks no --yes). `unrepaired` lists objects no pack and not this store "
            "holds, with the machine that pushed the ref; exits 1 when any are left.",
        ),
        remote_repair,
    ),
    Verb(
        Contract(
            name="remote.rekey",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.SETTINGS,
            request=RemoteRekeyRequest,
            result=RemoteRekeyResult,
            cli="remote rekey",
            errors=(
                *ERRORS,
                BadKeyError,
                KeyFileMissingError,
                KeyFileUnsafeError,
                KeyFileTakenError,
                InvalidArgumentError,
            ),
            doc="Give a remote a new recovery key without sending its data again: a key file "
            "for the new key is written and proven to open the remote, this workspace keeps "
            "the new key, and the old key's file is removed (the old key then opens nothing). "
            "Without --new-key or --new-key-file one is generated and written to "
            "`<store>/keys/NAME-FP.key` (`key_file`; answered as `key` too, once); other "
            "machines take it with `till remote add URL --key-file PATH` (same name and URL).",
        ),
        remote_rekey,
    ),
)
