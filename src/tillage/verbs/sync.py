"""Verbs of sync: remotes (`remote add`, `remote list`), `sync --push | --pull | --follow`,
`clone`, `work`.

The recovery key is given as a file (`--key-file`, TILLAGE_RECOVERY_KEY_FILE), in argv or the
environment, or at a prompt (verbs/keys.py). `remote add` writes a key it generated to a file,
and answers it (`key`) to its caller alone: nothing an agent calls shows it (`remote list`,
tools, events, errors), and no command tillage prints spells it out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tillage.crypto import BadKeyError
from tillage.crypto.errors import KeyFileMissingError, KeyFileTakenError, KeyFileUnsafeError
from tillage.errors import (
    BusyError,
    ConflictError,
    IntegrityError,
    InvalidArgumentError,
    UsageError,
)
from tillage.features.sync.errors import (
    LeaseDamagedError,
    LeaseExpiredError,
    LeaseHeldError,
    NotARemoteError,
    OldFormatError,
    PullFirstError,
    RefMissingError,
    RemoteExistsError,
    RollbackError,
    UnknownRemoteError,
)
from tillage.features.sync.repository import RemoteOccupiedError
from tillage.remote.errors import BadRemoteUrlError, RemoteProtocolError, RemoteUnavailableError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info
from tillage.workspace.errors import RefusedRootError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.features.sync.engine import PullOutcome
    from tillage.features.sync.follow import Follower
    from tillage.verbs.keys import RemoteKey
    from tillage.workspace.attach import Workspace

KEY_FILE_ERRORS = (KeyFileMissingError, KeyFileUnsafeError)
TRANSPORT_ERRORS = (
    RemoteUnavailableError,
    RemoteProtocolError,
    BadRemoteUrlError,
    NotARemoteError,
    OldFormatError,
    IntegrityError,
)


def _cwd(ctx: Context) -> str:
    return str(ctx.settings.folder)


def _absolute(url: str, ctx: Context) -> str:
    """A folder remote's URL as its transport normalises it (others are kept as given)."""
    import os

    if "://" in url:
        return url
    return os.path.normpath(os.path.join(_cwd(ctx), os.path.expanduser(url)))


# -- remote add / list --------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteAddRequest:
    url: str = param(
        "a folder, ssh://[user@]host[:port]/path or s3://bucket[/prefix]", positional=True
    )
    name: str = param("what this workspace calls it", default="origin")
    key: str | None = param(
        "the remote's recovery key (64 hex; seen by `ps`: prefer --key-file); without one a "
        "new key is generated and written to a file (`key_file`)",
        default=None,
        metavar="HEX",
    )
    key_file: str | None = param(
        "a file holding the remote's key (chmod 600); when there is no file there, a new key "
        "is generated and written to it (0600)",
        default=None,
        metavar="PATH",
    )
    remote_till: str | None = param(
        "the `till` command on the far side of an ssh:// remote", default=None, metavar="PATH"
    )


@dataclass(frozen=True)
class RemoteAddResult:
    remote: str
    name: str
    clone_url: str
    # Present only when it was generated now, and not into the file --key-file named: for the
    # caller to keep (a person's page shows `key_file` instead).
    key: str | None = field(default=None, metadata={"omit_none": True})
    # Where the key generated now was written (0600): --key-file, or the store's keys/ folder.
    key_file: str | None = field(default=None, metadata={"omit_none": True})
    # The folder a clone elsewhere would be made in (never the remote's own folder, which
    # `till clone URL` alone makes when run beside it).
    clone_dest: str | None = field(default=None, metadata={"omit_none": True})


def _check_remote_name(req: RemoteAddRequest) -> None:
    """A bad URL or name is refused before anything else (no key file is written)."""
    from tillage.remote.url import remote_kind

    remote_kind(req.url)
    if (
        not req.name
        or len(req.name) > 100
        or req.name.startswith(".")
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in req.name)
    ):
        raise InvalidArgumentError(
            f"--name {req.name[:40]!r} is not a remote name",
            next_step="use letters, digits, '.', '-' and '_' (e.g. origin, laptop, my.project)",
        )


def remote_add(ctx: Context, req: RemoteAddRequest) -> RemoteAddResult:
    """Adds the remote (_add_remote) with the key verbs/keys.py finds or makes; a key file
    written for it is removed again when the remote could not be added (its key opens
    nothing: a retry makes a new one)."""
    from tillage.crypto.keyfile import remove_key_file
    from tillage.verbs.keys import remote_add_key

    _check_remote_name(req)
    chosen = remote_add_key(ctx, req.key, req.key_file, req.name)
    try:
        return _add_remote(ctx, req, chosen)
    except BaseException:
        if chosen.written is not None:
            remove_key_file(chosen.written)
        raise


def _add_remote(ctx: Context, req: RemoteAddRequest, chosen: RemoteKey) -> RemoteAddResult:
    from tillage.features.sync import remotes
    from tillage.features.sync.engine import open_for
    from tillage.features.sync.repository import add_place

    ws = ctx.workspace
    generated, key = chosen.generated, chosen.key
    config = remotes.RemoteConfig(req.name, req.url, key, req.remote_till)
    for known in remotes.load(ws.store, ws.id):
        if known.name == req.name and known.url not in (req.url, _absolute(req.url, ctx)):
            raise RemoteExistsError(
                f"this workspace already has a remote called {req.name!r} ({known.url})"
            )
    remote = open_for(config, ctx.settings.env, _cwd(ctx))
    try:
        # Probe and look first, write last: a refused add leaves the place as it was (a key
        # generated now cannot open a remote there: sync.remote_occupied).
        url = remote.url
        endpoint = add_place(remote, key, generated=generated)
    finally:
        remote.close()
    # The transport's own form of the URL: a folder given relative to here is kept absolute,
    # so the remote is the same place from any folder later; an S3 endpoint named by the
    # environment now is recorded, so later processes use this one, whatever theirs says.
    remotes.add(
        ws.store, ws.id, remotes.RemoteConfig(req.name, url, key, req.remote_till, endpoint)
    )
    return RemoteAddResult(
        remote=url,
        name=req.name,
        clone_url=url,
        key=key.hex() if generated and req.key_file is None else None,
        key_file=str(chosen.written) if chosen.written is not None else None,
        clone_dest=_clone_dest(ws.root.name, url),
    )


def _clone_dest(name: str, url: str) -> str:
    """The workspace's own folder name, for a clone on another machine; with `-clone` added
    when it is the remote's last path segment (a clone run beside the remote would aim at it)."""
    last = url.rstrip("/").rsplit("/", 1)[-1]
    return f"{name}-clone" if name == last else name


@dataclass(frozen=True)
class RemoteListRequest:
    pass


@dataclass(frozen=True)
class RemoteInfo:
    name: str
    remote: str
    clone_url: str


@dataclass(frozen=True)
class RemoteListResult:
    remotes: tuple[RemoteInfo, ...]


def remote_list(ctx: Context, req: RemoteListRequest) -> RemoteListResult:
    from tillage.features.sync import remotes

    ws = ctx.workspace
    return RemoteListResult(
        tuple(RemoteInfo(r.name, r.url, r.url) for r in remotes.load(ws.store, ws.id))
    )


# -- sync ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncRequest:
    push: bool = param("send this workspace's state (sealed first) to the ref", default=False)
    pull: bool = param("bring the ref's state here (fast-forward, or say diverged)", default=False)
    ref: str = param("the named head on the remote", default="main")
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)
    takeover: bool = param(
        "with --push (or --follow): take over a ref whose lease expired or is damaged (never "
        "newer work); needs --yes",
        default=False,
    )
    yes: bool = param("confirm --takeover", default=False)
    accept_rollback: bool = param(
        "go on although the ref is older than this machine saw it (the remote was restored "
        "on purpose): that state, and what moves on from it, is trusted from now on",
        default=False,
    )
    bootstrap: bool = param(
        "with --pull: take the remote's state although this workspace never synced that ref "
        "(the present is sealed first)",
        default=False,
    )
    follow: bool = param(
        "keep this workspace and the ref current both ways, one JSON line per cycle, until "
        "interrupted; pauses (and says so) when they diverged",
        default=False,
    )
    poll_seconds: float = param("with --follow: seconds between cycles", default=2.0, metavar="N")


@dataclass(frozen=True)
class SyncResult:
    ref: str
    remote: str
    snapshot: SnapshotInfo | None = field(default=None, metadata={"omit_none": True})
    uploaded_objects: int | None = field(default=None, metadata={"omit_none": True})
    reused_objects: int | None = field(default=None, metadata={"omit_none": True})
    uploaded_bytes: int | None = field(default=None, metadata={"omit_none": True})
    disposition: str | None = field(default=None, metadata={"omit_none": True})
    local_snapshot: str | None = field(default=None, metadata={"omit_none": True})
    remote_snapshot: str | None = field(default=None, metadata={"omit_none": True})
    fetched_objects: int | None = field(default=None, metadata={"omit_none": True})
    fetched_bytes: int | None = field(default=None, metadata={"omit_none": True})
    # With a pull that landed: the folder as it was before (`till rewind UNDO --yes`).
    undo: str | None = field(default=None, metadata={"omit_none": True})
    # Files another writer changed while the pull landed: kept in the `rescue` snapshot.
    rescued: tuple[str, ...] | None = field(default=None, metadata={"omit_none": True})
    rescue: str | None = field(default=None, metadata={"omit_none": True})
    # With `diverged`: the exact command that lands the incoming snapshot here.
    next: str | None = field(default=None, metadata={"omit_none": True})

    def undo_plan(self, req: SyncRequest) -> dict[str, Any] | None:
        """`till undo` of a pull that landed: the folder back to its pre-pull seal. A push
        changed the remote, which no undo here takes back."""
        if req.push:
            return {"kind": "none", "why": "a push changed the remote; push an older state"}
        if self.undo is None:
            return None  # up to date, or diverged: nothing landed
        return {"kind": "rewind", "to": self.undo, "paths": None}

    def exit_status(self) -> int:
        """A pull that diverged completed but landed nothing: 3, with this document."""
        return 3 if self.disposition == "diverged" else 0


def _check_ref(ref: str) -> None:
    if not ref or len(ref) > 200 or any(c in ref for c in "\0\n\r"):
        raise InvalidArgumentError(
            f"--ref {ref[:40]!r} is not a ref name", next_step="give a short name such as main"
        )


def sync(ctx: Context, req: SyncRequest) -> SyncResult | Follower:
    from tillage.features.sync import engine, remotes

    if req.follow:
        return _follow(ctx, req)
    if req.push == req.pull:
        # A missing (or doubled) mode is a usage error: exit 2, as argparse's own (CONTRACT).
        raise UsageError(
            "give exactly one of --push, --pull and --follow",
            next_step="`till sync --push` sends this folder's timeline; `till sync --pull` "
            "brings the remote's",
        )
    _check_ref(req.ref)
    ws = ctx.workspace
    config = remotes.find(ws.store, ws.id, req.remote)
    if req.push:
        pushed = engine.push(
            ws,
            config,
            ctx.settings.env,
            _cwd(ctx),
            req.ref,
            takeover=req.takeover,
            accept_rollback=req.accept_rollback,
            on_progress=ctx.on_progress,
        )
        return SyncResult(
            ref=req.ref,
            remote=config.name,
            snapshot=snapshot_info(pushed.snapshot),
            uploaded_objects=pushed.pushed.uploaded_objects,
            reused_objects=pushed.pushed.reused_objects,
            uploaded_bytes=pushed.pushed.uploaded_bytes,
        )
    pulled = engine.pull(
        ws,
        config,
        ctx.settings.env,
        _cwd(ctx),
        req.ref,
        bootstrap=req.bootstrap,
        accept_rollback=req.accept_rollback,
        on_progress=ctx.on_progress,
    )
    return SyncResult(
        ref=req.ref,
        remote=config.name,
        disposition=pulled.disposition,
        local_snapshot=pulled.local.id if pulled.local else None,
        remote_snapshot=pulled.remote_snapshot,
        fetched_objects=pulled.fetched_objects,
        fetched_bytes=pulled.fetched_bytes,
        undo=pulled.undo,
        rescued=pulled.rescued or None,
        rescue=pulled.rescue,
        next=_landing(pulled, ws, config.name, req.ref)
        if pulled.disposition == "diverged"
        else None,
    )


def _landing(pulled: PullOutcome, ws: Workspace, remote: str, ref: str) -> str:
    """How a person lands a diverged pull: merge it three-way, or, for a ref this workspace
    never synced, take the remote's state with --bootstrap (the present is sealed first)."""
    synced = ws.store.sync_ref(ws.id, remote, ref)
    if synced is None:
        return (
            f"till sync --pull --ref {ref} --bootstrap "
            f"(or till merge --snapshot {pulled.remote_snapshot})"
        )
    # The base named outright: the incoming snapshot may be known here from another ref, with
    # other parents than this pull gives it.
    return f"till merge --snapshot {pulled.remote_snapshot} --base {synced.snapshot}"


def _takeover_needs_yes(req: SyncRequest) -> bool:
    """A takeover replaces another machine's lease: destructive (CONTRACT), so it needs
    --yes (or a person's answer at a terminal)."""
    return req.takeover and not req.yes


def _takeover_confirmed(req: SyncRequest) -> SyncRequest:
    return replace(req, yes=True)


def _follow(ctx: Context, req: SyncRequest) -> Follower:
    """`sync --follow`: a stream of cycle reports (features/sync/follow.py)."""
    from tillage.features.after_write import after_write
    from tillage.features.sync import remotes
    from tillage.features.sync.follow import MIN_POLL_SECONDS, Follower

    if req.push or req.pull or req.bootstrap:
        raise InvalidArgumentError(
            "--follow pulls and pushes by itself: leave out --push, --pull and --bootstrap",
            next_step="till sync --follow [--poll-seconds N] [--ref R]",
        )
    seconds = float(req.poll_seconds)
    if not MIN_POLL_SECONDS <= seconds <= 86400:
        raise InvalidArgumentError(
            f"--poll-seconds takes a number of seconds from {MIN_POLL_SECONDS} to 86400",
            next_step="e.g. --poll-seconds 2",
        )
    _check_ref(req.ref)
    ws = ctx.workspace
    config = remotes.find(ws.store, ws.id, req.remote)
    return Follower(
        ws,
        config,
        ctx.settings.env,
        _cwd(ctx),
        req.ref,
        poll_seconds=seconds,
        takeover=req.takeover,
        accept_rollback=req.accept_rollback,
        after_write=after_write,
        merge_incoming=_merge_incoming,
    )


def _merge_incoming(ws: Workspace, incoming: str, base: str) -> tuple[str | None, tuple[str, ...]]:
    """A follower's three-way merge of a diverged pull (as `till merge --snapshot ID --base
    BASE`): the result's ID when it landed, and the conflicting paths."""
    from tillage.features.merge import merge as mg

    outcome = mg.merge_snapshot(ws, incoming, base)
    return (outcome.result.id if outcome.landed and outcome.result else None), tuple(
        c.path for c in outcome.conflicts
    )


# -- clone --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CloneRequest:
    url: str = param("the remote to clone", positional=True)
    dest: str | None = param(
        "the new folder (default: the remote's last path segment)", default=None, positional=True
    )
    key: str | None = param(
        "the remote's recovery key (seen by `ps`: prefer --key-file; or TILLAGE_RECOVERY_KEY)",
        default=None,
        metavar="HEX",
    )
    key_file: str | None = param(
        "a file holding the remote's key, chmod 600 (or TILLAGE_RECOVERY_KEY_FILE); without "
        "any, a terminal asks for it",
        default=None,
        metavar="PATH",
    )
    ref: str = param("the named head to clone", default="main")
    accept_rollback: bool = param(
        "clone although the ref is older than this store saw it", default=False
    )
    remote_till: str | None = param(
        "the `till` command on the far side of an ssh:// remote", default=None, metavar="PATH"
    )


@dataclass(frozen=True)
class CloneResult:
    workspace: str
    head: SnapshotInfo
    remote: str
    ref: str


def clone(ctx: Context, req: CloneRequest) -> CloneResult:
    from tillage.features.sync.clone import clone as clone_remote
    from tillage.remote.url import remote_kind
    from tillage.verbs.keys import required_key

    remote_kind(req.url)
    _check_ref(req.ref)
    key = required_key(ctx, req.key, req.key_file, "a clone").key
    s = ctx.settings
    ws, head, url = clone_remote(
        home=s.home,
        user_home=s.user_home,
        folder=s.folder,
        env=s.env,
        url=req.url,
        key=key,
        ref=req.ref,
        dest=req.dest,
        remote_till=req.remote_till,
        accept_rollback=req.accept_rollback,
        on_progress=ctx.on_progress,
    )
    ctx.workspace = ws  # the invocation's after-write step follows it
    return CloneResult(str(ws.root), snapshot_info(head), url, req.ref)


# -- work ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkRequest:
    remote: str = param(
        "the remote: a folder, ssh://[user@]host[:port]/path or s3://bucket[/prefix]",
        metavar="URL",
    )
    result_ref: str = param(
        "the ref the result is pushed to (even when the command failed)", metavar="OUT"
    )
    command: tuple[str, ...] = param(
        "the command, after `--`; one word runs through /bin/sh -c, several are the argv; it "
        "runs in the disposable folder and gets TILLAGE_WORK_INPUT (the input snapshot), "
        "TILLAGE_WORK_REF and TILLAGE_WORK_RESULT_REF (never the key: not in its environment, "
        "nor in its parent's argv or environment)",
        remainder=True,
        metavar="CMD",
    )
    name: str = param(
        "names this run: its disposable folder, the remote as that folder's workspace calls "
        "it, and the result's label",
        default="work",
    )
    key: str | None = param(
        "the remote's recovery key (seen by `ps`: prefer --key-file; or TILLAGE_RECOVERY_KEY)",
        default=None,
        metavar="HEX",
    )
    key_file: str | None = param(
        "a file holding the remote's key, chmod 600 (or TILLAGE_RECOVERY_KEY_FILE); without "
        "any, a terminal asks for it",
        default=None,
        metavar="PATH",
    )
    ref: str = param(
        "the input ref: the command runs on its snapshot", default="main", metavar="IN"
    )
    keep: bool = param(
        "keep the disposable folder and its timeline (`folder` says where)", default=False
    )
    accept_rollback: bool = param(
        "run although a ref is older than this store saw it", default=False
    )
    remote_till: str | None = param(
        "the `till` command on the far side of an ssh:// remote", default=None, metavar="PATH"
    )


@dataclass(frozen=True)
class WorkResult:
    """A headless run: `input` and `result` are snapshot IDs (the result's parent is the
    input); `exit_code`/`output` the command's; `folder` the kept folder (null once removed)."""

    input: str
    result: str
    exit_code: int
    output: str
    ref: str
    result_ref: str
    folder: str | None
    uploaded_objects: int
    uploaded_bytes: int

    def exit_status(self) -> int:
        """The command's own status."""
        return self.exit_code


def work(ctx: Context, req: WorkRequest) -> WorkResult:
    from tillage.features.sync import remotes
    from tillage.features.sync.work import work as run_work
    from tillage.platform.commands import argv_of
    from tillage.remote.url import remote_kind
    from tillage.verbs.keys import required_key

    remote_kind(req.remote)
    _check_ref(req.ref)
    _check_ref(req.result_ref)
    argv_of(req.command)
    if not req.name or not req.name.replace("-", "").replace("_", "").isalnum():
        raise InvalidArgumentError(
            f"--name {req.name[:40]!r} is not a name",
            next_step="use letters, digits, - and _ (e.g. ci, build-7)",
        )
    key = required_key(ctx, req.key, req.key_file, "work").key
    config = remotes.RemoteConfig(req.name, req.remote, key, req.remote_till)
    done = run_work(
        ctx.settings.home,
        ctx.settings.user_home,
        ctx.settings.env,
        _cwd(ctx),
        config,
        req.ref,
        req.result_ref,
        req.command,
        keep=req.keep,
        launch=ctx.settings.launch,
        accept_rollback=req.accept_rollback,
    )
    return WorkResult(
        input=done.input,
        result=done.result,
        exit_code=done.exit_code,
        output=done.output,
        ref=req.ref,
        result_ref=req.result_ref,
        folder=str(done.folder) if done.folder is not None else None,
        uploaded_objects=done.uploaded_objects,
        uploaded_bytes=done.uploaded_bytes,
    )


# Any: `sync --follow` answers a stream of cycle reports, not a SyncResult.
VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="remote.add",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.SETTINGS,
            request=RemoteAddRequest,
            result=RemoteAddResult,
            cli="remote add",
            errors=(
                *TRANSPORT_ERRORS,
                BadKeyError,
                *KEY_FILE_ERRORS,
                KeyFileTakenError,
                RemoteExistsError,
                RemoteOccupiedError,
                InvalidArgumentError,
            ),
            doc="Add a remote this workspace syncs with: a folder, ssh://[user@]host[:port]/path "
            "or s3://bucket[/prefix]. Everything stored there is encrypted with a 32-byte "
            "recovery key, given as --key-file PATH (or --key, TILLAGE_RECOVERY_KEY_FILE, "
            "TILLAGE_RECOVERY_KEY). Without one a new key is generated and written (0600) to "
            "--key-file's PATH when no file is there, else to the store's keys/ folder: "
            "`key_file` says where — copy that file to the other machine; with no --key-file "
            "the key is also answered once, as `key`. Nothing else ever shows it.",
        ),
        remote_add,
    ),
    Verb(
        Contract(
            name="remote.list",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=RemoteListRequest,
            result=RemoteListResult,
            cli="remote list",
            doc="List this workspace's remotes (never their keys).",
        ),
        remote_list,
    ),
    Verb(
        Contract(
            name="sync.run",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=SyncRequest,
            result=SyncResult,
            cli="sync",
            errors=(
                *TRANSPORT_ERRORS,
                PullFirstError,
                LeaseHeldError,
                LeaseExpiredError,
                LeaseDamagedError,
                RollbackError,
                RefMissingError,
                UnknownRemoteError,
                BusyError,
                InvalidArgumentError,
                UsageError,
            ),
            needs_confirmation=_takeover_needs_yes,
            confirmed=_takeover_confirmed,
            doc="--push seals the folder and sends it to a named ref of the remote (only what "
            "the remote lacks; refused with sync.pull_first when the ref moved to work this "
            "machine has not pulled). --pull brings the ref here: fast-forwards the folder when "
            "it has not changed since the last sync (unchanged files keep their inodes), else "
            "exits 3 with disposition diverged, keeping the incoming snapshot for `till merge "
            "--snapshot ID`. One writer per ref (a lease; --takeover --yes takes an expired or "
            "damaged one). A ref older than this machine saw it (a lower version, another "
            "snapshot at the same version, or gone: the remote was rolled back) is refused "
            "with sync.rollback, nothing changed; --accept-rollback goes on from it. "
            "--follow keeps both current: every --poll-seconds (default 2) it pulls, then "
            "pushes when the folder changed, printing one JSON line per cycle: `cycle`, `at`, "
            "`remote`, `ref`, `pulled` (the disposition, or `missing` before the first push), "
            "`fetched_objects`, `pushed` (a snapshot ID or null), `uploaded_objects`, "
            "`uploaded_bytes`, `merged`, `paused`, `conflicts`, `incoming`, `next_step`, `error`, "
            "`retry_in`. On diverged it merges three-way by itself (the last synced snapshot "
            "the ancestor; `merged` names the result) and pushes the merge; only a conflict "
            "pauses it (`paused: true`, `conflicts`, `next_step: till merge --snapshot ID`), "
            "and it resumes by itself once the folder descends from the incoming snapshot; an "
            "error "
            "is that cycle's `error` envelope and the next cycle comes after a backoff.",
        ),
        sync,
    ),
    Verb(
        Contract(
            name="sync.clone",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=CloneRequest,
            result=CloneResult,
            cli="clone",
            errors=(
                *TRANSPORT_ERRORS,
                BadKeyError,
                *KEY_FILE_ERRORS,
                RefMissingError,
                RollbackError,
                InvalidArgumentError,
                ConflictError,
                BusyError,
                RefusedRootError,
            ),
            doc="Make a new folder holding a remote ref's exact state, attached as a workspace "
            "of its own (nested, when inside another: the outer one is not touched) and with "
            "the remote added as origin (the key from --key-file, TILLAGE_RECOVERY_KEY_FILE, "
            "TILLAGE_RECOVERY_KEY or --key, else asked for at a terminal). It completes or "
            "leaves nothing: a killed clone is finished or undone by the next command, and a "
            "retry works.",
        ),
        clone,
    ),
    Verb(
        Contract(
            name="sync.work",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=WorkRequest,
            result=WorkResult,
            cli="work",
            errors=(
                *TRANSPORT_ERRORS,
                BadKeyError,
                *KEY_FILE_ERRORS,
                RefMissingError,
                PullFirstError,
                LeaseHeldError,
                LeaseExpiredError,
                LeaseDamagedError,
                RollbackError,
                BusyError,
                InvalidArgumentError,
            ),
            doc="Run a command on a remote ref's snapshot with no workspace of your own (a CI "
            "runner, a sandbox): the ref --ref (IN) is written out into a disposable folder, "
            "the command runs there, the result is sealed with IN's snapshot as its parent and "
            "pushed to --result-ref (OUT) even when the command failed, and the folder and its "
            "timeline are removed (unless --keep). Answers `input`, `result` (snapshot IDs), "
            "`exit_code`, and exits with the command's status. A run replaces the previous "
            "result of OUT (kept in its history); runs on different OUT refs never contend.",
        ),
        work,
    ),
)
