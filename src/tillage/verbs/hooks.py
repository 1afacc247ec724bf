"""The agent-turn hook verb: `till hook pre-turn | post-tool | turn-end | session-end | install
| uninstall`.

A hook runs inside an agent's loop, so it must never block or break the agent: it exits 0 on a
folder that is not attached (sealing nothing, saying so), ignores a payload it cannot read, waits
only briefly for a busy workspace, and never exits 2 (harnesses read 2 as "block the agent").

`install` writes Claude Code's hooks where they belong: into `.claude/settings.json`, the file
teams commit, naming `till` on PATH and the folder as `$CLAUDE_PROJECT_DIR` (nothing of this
machine), when the `till` on PATH is this tillage; else into `.claude/settings.local.json`
(never committed) with this machine's absolute path; the result says which and why. It then
starts the folder's watcher (unless --no-watcher): a hook answered by the watcher costs a
round trip on its socket instead of a start-up and a walk of the whole folder, and the hooks
are what an agent fires after every turn and every edit.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, InvalidArgumentError
from tillage.features.hooks.errors import InvalidAgentSettingsError, UnsafeSettingsDirError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info
from tillage.workspace.errors import UnsafeControlDirError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The watcher `install` starts: `till watch`'s own default quiet time.
DEBOUNCE_MS = 500

# Declared here (not imported from the feature module) so listing contracts stays cheap.
INSTALL = "install"
UNINSTALL = "uninstall"


@dataclass(frozen=True)
class HookRequest:
    event: str | None = param(
        "pre-turn, post-tool, turn-end, session-end, install or uninstall; without it, the "
        "harness payload's event",
        default=None,
        positional=True,
        metavar="EVENT",
    )
    agent: str | None = param(
        "who is acting (default: TILLAGE_AGENT, else claude-code for a Claude Code payload); "
        "for install, the harness: claude-code (default) or generic",
        default=None,
    )
    turn: str | None = param(
        "the agent's turn this boundary belongs to (default: counted from the session's "
        "pre-turn hooks)",
        default=None,
    )
    tool: str | None = param("the tool that just ran (post-tool)", default=None)
    session: str | None = param(
        "the agent session (default: the payload's session_id)", default=None
    )
    payload: str | None = param(
        "the harness's JSON document (read from stdin when it is not a terminal); a payload "
        "that is not a JSON object is ignored",
        default=None,
    )
    no_watcher: bool = param(
        "for install: leave the folder's watcher as it is (hooks then seal in their own "
        "process: slower)",
        default=False,
    )


@dataclass(frozen=True)
class HookResult:
    event: str
    snapshot: SnapshotInfo | None
    sealed: bool
    workspace: str | None
    agent: str | None
    turn: str | None
    session: str | None
    tool: str | None
    installed: tuple[str, ...]
    note: str | None
    # The session commit that holds this state, when the hook has a session: a pre-turn starts
    # the session's changelog (`till session log`), a turn-end records the turn in it, a
    # session-end records and ends it.
    session_commit: str | None = None
    # install and uninstall: the files taken out of (uninstall; install: the other settings
    # file, when it held tillage's hooks), besides those in `installed`.
    removed: tuple[str, ...] = ()
    # install: the settings file that holds the hooks now (null for --agent generic).
    settings: str | None = None
    # install: whether the folder's watcher runs now (null: not asked, --no-watcher).
    watching: bool | None = None

    def undo_plan(self, _req: Any) -> dict[str, Any] | None:
        """A hook's seal is in the timeline, its record: no operation (an agent's session would
        bury the log in them). Installing or uninstalling hooks is one; each undoes the other."""
        if self.event in (INSTALL, UNINSTALL):
            return {"kind": "none", "why": "`till hook install` and `uninstall` undo each other"}
        return None


def hook(ctx: Context, req: HookRequest) -> HookResult:
    from tillage.core.agent_hooks import EVENTS, read_payload

    payload = read_payload(req.payload)
    event = req.event if req.event is not None else payload.event
    if event == INSTALL:
        return _install(ctx, req)
    if event == UNINSTALL:
        return _uninstall(ctx, req)
    if event not in EVENTS:
        shown = "no event" if event is None else f"unknown event {event!r}"
        raise InvalidArgumentError(
            f"till hook: {shown}",
            next_step="use one of: " + ", ".join((*EVENTS, INSTALL, UNINSTALL)),
        )
    agent = req.agent or ctx.settings.agent or payload.agent
    tool = req.tool or payload.tool
    session = req.session or payload.session
    notes = [payload.problem] if payload.problem else []

    def answer(
        row: object | None,
        sealed: bool,
        workspace: str | None,
        turn: str | None = req.turn,
        commit: str | None = None,
    ) -> HookResult:
        return HookResult(
            event=event,
            snapshot=snapshot_info(row) if row is not None else None,
            sealed=sealed,
            workspace=workspace,
            agent=agent,
            turn=turn,
            session=session,
            tool=tool,
            installed=(),
            note="; ".join(notes) or None,
            session_commit=commit,
        )

    from tillage.workspace.attach import find_workspace
    from tillage.workspace.recovery import recover_if_interrupted

    ws = find_workspace(ctx.settings.home, ctx.settings.folder)
    if ws is None:
        notes.insert(0, f"{ctx.settings.folder} is not attached to tillage; nothing was sealed")
        return answer(None, False, None)
    recover_if_interrupted(ws)  # INV-7: a hook never seals a half-rewound folder
    ctx.workspace = ws  # the invocation's after-write step follows it

    from tillage.core.agent_hooks import hook_label
    from tillage.features.hooks.hooks import seal_hook, session_turn
    from tillage.workspace.seal import SealOptions

    turn = req.turn if req.turn is not None else session_turn(ws, session, event)
    options = SealOptions(
        trigger="hook",
        label=hook_label(event, agent, turn, tool, payload.reason),
        agent=agent,
        turn=turn,
        session=session,
        # A tool's hook and a session's end mark no boundary of their own: they keep what
        # changed, when something did (a session ends right after its last turn's end).
        skip_unchanged=event in ("post-tool", "session-end"),
    )
    try:
        done = seal_hook(ws, options, event=event)
    except BusyError:
        raise BusyError(
            f"another tillage process held {ws.root} for too long; this {event} hook sealed "
            "nothing",
            next_step="nothing to do: the next hook (or the watcher) seals the folder",
        ) from None
    if not done.sealed:
        notes.insert(0, "nothing changed since the last snapshot; nothing was sealed")
    commit = done.commit.id if done.commit is not None else None
    return answer(done.snapshot, done.sealed, str(ws.root), turn, commit)


def _harness(req: HookRequest, verb: str) -> str:
    from tillage.core.agent_hooks import CLAUDE_AGENT, HARNESSES

    harness = req.agent or CLAUDE_AGENT
    if harness not in HARNESSES:
        raise InvalidArgumentError(
            f"till hook {verb}: unknown agent {harness!r}",
            next_step="use --agent claude-code or --agent generic",
        )
    return harness


def _install(ctx: Context, req: HookRequest) -> HookResult:
    from tillage.core.agent_hooks import CLAUDE_AGENT
    from tillage.features.hooks.hooks import (
        hook_till,
        install_claude_code,
        install_generic,
        till_command,
    )
    from tillage.workspace.attach import require_workspace

    harness = _harness(req, INSTALL)
    ws = require_workspace(ctx.settings.home, ctx.settings.folder, ctx.settings.user_home)
    notes = []
    removed: list[str] = []
    settings = None
    if harness == CLAUDE_AGENT:
        till = hook_till(ctx.settings.env.get("PATH"))
        done, held = install_claude_code(ws, till)
        written = [w for w in done if w == str(held)]
        removed = [w for w in done if w != str(held)]
        settings = str(held)
        where = (
            "the project's settings (commit them: they name no path of this machine)"
            if till.shared
            else "this checkout's own settings (Claude Code never commits them), with this "
            "machine's path to till"
        )
        notes.append(f"the hooks are in {held}, {where}: {till.why}")
        if removed:
            notes.append(f"took tillage's hooks out of {', '.join(removed)} so they run once")
    else:
        written = install_generic(ws, till_command())
    if not written:
        notes.insert(0, f"tillage's {harness} hooks were already installed")
    watching = None if req.no_watcher else _start_watcher(ctx, ws, notes)
    return HookResult(
        event=INSTALL,
        snapshot=None,
        sealed=False,
        workspace=str(ws.root),
        agent=harness,
        turn=None,
        session=None,
        tool=None,
        installed=tuple(written),
        note="; ".join(notes),
        removed=tuple(removed),
        settings=settings,
        watching=watching,
    )


def _start_watcher(ctx: Context, ws: Any, notes: list[str]) -> bool:
    """Starts the folder's watcher unless one runs; a watcher that will not start is said, not
    raised: the hooks are installed and seal without it."""
    from tillage.errors import TillageError
    from tillage.platform.launch import inherited_env
    from tillage.watch import daemon
    from tillage.workspace import watchstate

    if watchstate.is_watching(ws.store.home, ws.id):
        return True
    try:
        daemon.start(ws.store.home, ws.root, ws.id, DEBOUNCE_MS, inherited_env(ctx.settings.launch))
    except TillageError as err:
        notes.append(
            f"the watcher did not start ({err.message}); the hooks seal in their own process, "
            "slower: start it with `till watch`"
        )
        return False
    notes.append("started the folder's watcher: the hooks seal through it")
    return True


def _uninstall(ctx: Context, req: HookRequest) -> HookResult:
    from tillage.core.agent_hooks import CLAUDE_AGENT
    from tillage.features.hooks.hooks import uninstall_claude_code, uninstall_generic
    from tillage.workspace.attach import require_workspace

    harness = _harness(req, UNINSTALL)
    ws = require_workspace(ctx.settings.home, ctx.settings.folder, ctx.settings.user_home)
    removed = uninstall_claude_code(ws) if harness == CLAUDE_AGENT else uninstall_generic(ws)
    note = (
        f"took tillage's {harness} hooks out; everything else was left as it was"
        if removed
        else f"no {harness} hooks of tillage were installed here"
    )
    return HookResult(
        event=UNINSTALL,
        snapshot=None,
        sealed=False,
        workspace=str(ws.root),
        agent=harness,
        turn=None,
        session=None,
        tool=None,
        installed=(),
        note=note,
        removed=tuple(removed),
    )


VERBS = (
    Verb(
        Contract(
            name="agent.hook",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=HookRequest,
            result=HookResult,
            cli="hook",
            errors=(
                BusyError,
                UnsafeControlDirError,
                InvalidAgentSettingsError,
                UnsafeSettingsDirError,
            ),
            event="sealed",
            stdin_param="payload",
            doc="Seal an attributed restore point at an agent's turn boundary (pre-turn, "
            "post-tool: only when something changed, turn-end; session-end: what changed, "
            "and the session's changelog ends), or install tillage's hooks into an agent's "
            "settings (install --agent claude-code | generic: Claude Code's go into "
            ".claude/settings.json naming `till` on PATH and $CLAUDE_PROJECT_DIR, or into "
            ".claude/settings.local.json with this machine's path when `till` on PATH is not "
            "this tillage, as `settings` and `note` say; it starts the folder's watcher unless "
            "--no-watcher), or take them out again (uninstall: only tillage's, from both "
            "files). Never exits 2; on a folder that is not attached it seals nothing and "
            "exits 0.",
        ),
        hook,
    ),
)
