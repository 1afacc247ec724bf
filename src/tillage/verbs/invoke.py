"""Runs a verb the same way for every door: resolve its scope, enforce confirmation, call it.

Safety rules live here, in one place, derived from contract metadata: a host supplies only how to
ask a person (or nothing, in machine mode), never whether to ask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tillage.errors import ConfirmationRequiredError
from tillage.platform.errors import DiskFullError
from tillage.verbs.contract import Effect, Scope, Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.core.progress import ProgressFn
    from tillage.platform.launch import Launch


@dataclass(frozen=True)
class Settings:
    """Everything a host read from the environment, argv and config, handed down frozen."""

    home: Path
    folder: Path
    agent: str | None = None
    debug: bool = False
    user_home: Path | None = None
    # The door is a process of its own that may keep running after its reply (a command line
    # in a terminal), not a call served for someone else or a library caller's process.
    own_process: bool = False
    # How a user command a verb runs (`run`, `exec`, `try`, merge checks, bisect probes, work)
    # starts: the door's environment, and its output copied live to the door's stdout (stderr
    # under --json: stdout holds one document). None: a library call's, this process's
    # environment and the output captured only.
    launch: Launch | None = None
    # The environment a verb may consult (remote URLs: TILLAGE_SSH, AWS_*, TILLAGE_S3_*): the
    # host's, read by the host; a library caller passes what it wants seen.
    env: Mapping[str, str] = field(default_factory=dict)
    # How to ask the person at this process's terminal for a secret without echoing it (the
    # recovery key: verbs/keys.py); None in machine mode and wherever no person is asked.
    ask_secret: Callable[[str], str | None] | None = None


@dataclass
class Context:
    """What a handler receives besides its request."""

    settings: Settings
    workspace: Any = None  # tillage.workspace.attach.Workspace once resolved
    # Where the verb reports a long operation's stages; None: nobody is shown them (an agent,
    # `--json`, a pipe), so engines skip even counting for it.
    on_progress: ProgressFn | None = None


def resolve_context(verb: Verb[Any, Any], settings: Settings, store: Any = None) -> Context:
    """Resolves the verb's scope: an attached workspace (opened: a landing a crash interrupted
    is finished first), a folder, or nothing. `store`: an open store a long-lived door keeps
    (None: open one)."""
    ctx = Context(settings=settings)
    if verb.contract.scope is Scope.WORKSPACE:
        from tillage.workspace.recovery import open_workspace

        finish_clones(settings.home, store)  # before the lookup: it may be that folder's
        ctx.workspace = open_workspace(settings.home, settings.folder, settings.user_home, store)
        names = pending_intents(ctx.workspace.store)  # one listing for both: forks touch no undo's
        finish_forks(ctx.workspace.store, names)
        finish_undos(ctx, names)
    return ctx


def pending_intents(store: Any) -> list[str]:
    """The names in the store's intents folder, what a crash may have left unfinished (none
    for a read-only store: nothing there can be finished)."""
    import os

    if store.read_only:
        return []
    try:
        return os.listdir(store.intents_dir)
    except FileNotFoundError:
        return []


# Verbs whose interrupted work the next command finishes (Contract.finish_pending), by the
# prefix of their intents' names: loaded through the registry only when one is there.
PENDING_INTENTS = {"undo-": "undo"}


def finish_undos(ctx: Context, names: list[str] | None = None) -> None:
    """An undo a crash interrupted is finished by the next command of any kind (as a killed
    fork is): one listing of the store's intents (`names`, when the caller has it), the undo
    verb loaded only when one of them is an undo's (verbs/oplog.py)."""
    if names is None:
        names = pending_intents(ctx.workspace.store)
    for prefix, command in PENDING_INTENTS.items():
        if any(n.startswith(prefix) for n in names):
            from tillage.verbs.registry import verb_for_command

            verb = verb_for_command(command)
            if verb is not None and verb.contract.finish_pending is not None:
                verb.contract.finish_pending(ctx)


def finish_forks(store: Any, names: list[str] | None = None) -> None:
    """What a killed fork or fork-rm left is finished by the next command of any kind, not
    only by the next fork command (issue 21's kill campaign): one listing of the store's
    intents (`names`, when the caller has it), and the forks feature loaded only when one of
    them is a fork's."""
    if names is None:
        names = pending_intents(store)
    if any(n.startswith("fork") for n in names):
        from tillage.features.forks.fork import finish_pending_anywhere

        finish_pending_anywhere(store)


def finish_clones(home: Path, store: Any = None) -> None:
    """A killed clone is finished (committed) or undone by the next command of any kind
    (features/sync/pending.py): one listing of the store's intents, the store opened and the
    sync feature loaded only when one of them is a clone's."""
    import os

    try:
        names = os.listdir(home / "intents")
    except OSError:
        return
    if not any(n.startswith("clone-") for n in names):
        return
    from tillage.features.sync.pending import finish_clones as finish
    from tillage.store.store import Store

    if store is not None:
        if not store.read_only:
            finish(store)
        return
    with Store.open(home) as opened:
        finish(opened)


def invoke(
    verb: Verb[Any, Any],
    settings: Settings,
    request: Any,
    *,
    confirm: Callable[[Any], bool] | None = None,
    on_progress: ProgressFn | None = None,
    store: Any = None,
) -> Any:
    """Runs `verb` on `request`; a file-system failure the caller can act on (a read-only
    store, a full disk) leaves as the public error that names it. `store`: an open store a
    long-lived door keeps, so the call pays no store start-up."""
    try:
        return _invoke(
            verb, settings, request, confirm=confirm, on_progress=on_progress, store=store
        )
    except OSError as exc:
        public = _file_system_error(exc, settings)
        if public is None:
            raise
        raise public from exc
    except DiskFullError as exc:
        raise _which_disk(exc, settings) from None
    except Exception as exc:
        if type(exc).__module__ == "sqlite3" and "readonly" in str(exc):
            raise _read_only(settings) from exc
        raise


def _file_system_error(exc: OSError, settings: Settings) -> Exception | None:
    import errno

    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and _under(
        exc.filename, settings.home
    ):
        return _read_only(settings)
    if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST):
        # A folder where the store keeps a file, or a file where it keeps a folder: damage
        # `verify --repair` sets aside (store/controls.py), never an internal error. (A
        # rename's target is its second name.)
        from tillage.store.controls import layout_problem
        from tillage.store.errors import ControlFileDamagedError

        for name in (exc.filename2, exc.filename):
            if _under(name, settings.home):
                found = layout_problem(settings.home, _path_of(name))
                if found is not None:
                    return ControlFileDamagedError.of(found[0], found[1])
    return None


def _path_of(filename: Any) -> Path:
    if isinstance(filename, bytes):
        filename = filename.decode("utf-8", "surrogateescape")
    return Path(filename)


def _under(filename: Any, folder: Path) -> bool:
    if isinstance(filename, bytes):
        filename = filename.decode("utf-8", "surrogateescape")
    if not isinstance(filename, str) or not filename:
        return False
    path = Path(filename)
    return path == folder or folder in path.parents


def _read_only(settings: Settings) -> Exception:
    from tillage.store.errors import StoreReadOnlyError

    return StoreReadOnlyError.at(settings.home)


def _disk(path: Path) -> tuple[int, int] | None:
    """(device, free bytes) of the file system holding `path` (or its nearest ancestor)."""
    import os

    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
            return os.stat(candidate).st_dev, st.f_bavail * st.f_frsize
        except OSError:
            continue
    return None


def _which_disk(exc: DiskFullError, settings: Settings) -> Exception:
    """Names the disk that is full: the workspace's, the store's, the one holding both, or
    the one a verb was writing elsewhere (a fork's destination: the error's `path`)."""
    store, folder = _disk(settings.home), _disk(settings.folder)
    elsewhere = exc.details.get("path")
    target = _disk(Path(elsewhere)) if isinstance(elsewhere, str) else None
    if target is not None and target[0] not in {d[0] for d in (store, folder) if d}:
        exc.message = f"no space left on the disk holding {elsewhere}"
        exc.details["disk"] = "destination"
        return exc
    if store is not None and folder is not None and store[0] == folder[0]:
        exc.message = (
            f"no space left on the disk holding both the workspace {settings.folder} "
            f"and the store {settings.home}"
        )
        exc.details["disk"] = "workspace_and_store"
        return exc
    if folder is not None and folder[1] < FULL_BELOW:
        from tillage.workspace.errors import WorkspaceDiskFullError

        return WorkspaceDiskFullError(
            f"no space left on the disk holding the workspace {settings.folder}",
            details={"disk": "workspace"},
        )
    exc.message = f"no space left on the disk holding the store {settings.home}"
    exc.details["disk"] = "store"
    return exc


FULL_BELOW = 1 << 20  # a file system with less free space than this is the full one


def _invoke(
    verb: Verb[Any, Any],
    settings: Settings,
    request: Any,
    *,
    confirm: Callable[[Any], bool] | None = None,
    on_progress: ProgressFn | None = None,
    store: Any = None,
) -> Any:
    """Runs `verb` on `request`.

    A request the contract says needs confirmation is previewed and shown to `confirm`; with no
    `confirm` (machine mode) it changes nothing and raises confirmation_required.
    """
    contract = verb.contract
    ctx = resolve_context(verb, settings, store)
    if on_progress is not None:
        ctx.on_progress = on_progress
    if contract.validate is not None:
        contract.validate(ctx, request)
    if contract.needs_confirmation is not None and contract.needs_confirmation(request):
        if confirm is None:
            raise ConfirmationRequiredError(
                f"{contract.cli} {contract.confirms} and needs --yes; nothing was changed",
                next_step=_confirm_step(contract, request, previewed=False),
            )
        preview = contract.preview(request) if contract.preview else None
        shown = verb.handler(ctx, preview) if preview is not None else None
        if not confirm(shown):
            raise ConfirmationRequiredError(
                f"{contract.cli} was not confirmed; nothing changed",
                next_step=_confirm_step(contract, request, previewed=shown is not None),
            )
        request = contract.confirmed(request) if contract.confirmed else request
    before: str | None = None
    recording = contract.effect is not Effect.READ and contract.records_operation
    if recording and ctx.workspace is not None:
        from tillage.verbs.oplog_record import head_of

        before = head_of(ctx.workspace.store, ctx.workspace.id)
    result = verb.handler(ctx, request)
    if recording:
        _record_operation(ctx, contract, request, result, before)
    if ctx.workspace is not None and contract.effect is not Effect.READ:
        from tillage.features.after_write import after_write

        event = _event(contract.event, request, result)
        after_write(ctx.workspace.store, ctx.workspace.id, event=event)
    return result


def _confirm_step(contract: Any, request: Any, *, previewed: bool) -> str:
    """The next step of a request that needs --yes: the very command with --yes (the target
    as given, a name or a 12-character ID), after its --dry-run when it has one and none was
    just shown."""
    from tillage.verbs.command_line import command_line

    run = f"`{command_line(contract, request, yes=True)}`"
    if previewed or not hasattr(request, "dry_run"):
        return f"to go ahead, run {run}"
    preview = f"`{command_line(contract, request, dry_run=True)}`"
    target = getattr(request, "id", None)
    if (hasattr(request, "id") and target is None) or (
        isinstance(target, str) and not _is_hex(target)
    ):
        # No target (`till undo`: the newest), or a name (head~1) that moves with the next
        # seal: the preview names the exact one, and --yes needs it named.
        return f"preview with {preview}: it ends with the exact command that applies it"
    return f"preview with {preview}, then run {run}"


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _record_operation(
    ctx: Context, contract: Any, request: Any, result: Any, before: str | None
) -> None:
    """The verb's operation in the operation log (verbs/oplog_record.py). The verb's change
    stands whatever happens here: a record the store cannot take (a full disk) is lost, and
    the verb is not reported as failed for it."""
    import contextlib

    from tillage.errors import TillageError
    from tillage.verbs import oplog_record

    settings = ctx.settings
    with contextlib.suppress(TillageError, OSError):
        if ctx.workspace is not None:
            ws = ctx.workspace
            oplog_record.record(ws.store, ws.id, settings.agent, contract, request, result, before)
        elif contract.scope is Scope.NONE:
            oplog_record.record_storewide(settings.home, settings.agent, contract, request, result)


def _event(kind: str | None, request: Any, result: Any) -> tuple[str, Any] | None:
    """The event a verb's success appends to the log, when that is no fact already there (a
    rewind; a seal or a pin is its own record, store/events.py). The result says what happened
    with `event_detail(request)`, or None when nothing did (a dry run)."""
    detail_of = getattr(result, "event_detail", None)
    if kind is None or not callable(detail_of):
        return None
    from tillage.store.events import APPENDED_KINDS

    if kind not in APPENDED_KINDS:
        return None
    detail = detail_of(request)
    return None if detail is None else (kind, detail)
