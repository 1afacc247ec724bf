"""The agent-turn hook verb: `till hook pre-turn | post-tool | turn-end | install`.

A hook runs inside an agent's loop, so it must never block or break the agent: it exits 0 on a
folder that is not attached (sealing nothing, saying so), ignores a payload it cannot read, waits
only briefly for a busy workspace, and never exits 2 (harnesses read 2 as "block the agent").
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, InvalidArgumentError
from tillage.features.hooks.errors import InvalidAgentSettingsError, UnsafeSettingsDirError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info
from tillage.workspace.errors import UnsafeControlDirError

# Declared here (not imported from the feature module) so listing contracts stays cheap.
INSTALL = "install"


@dataclass(frozen=True)
class HookRequest:
    event: str | None = param(
        "pre-turn, post-tool, turn-end, or install; without it, the harness payload's event",
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
    # the session's changelog (`till session log`), a turn-end records the turn in it.
    session_commit: str | None = None


def hook(ctx: Context, req: HookRequest) -> HookResult:
    from tillage.core.agent_hooks import EVENTS, read_payload

    payload = read_payload(req.payload)
    event = req.event if req.event is not None else payload.event
    if event == INSTALL:
        return _install(ctx, req)
    if event not in EVENTS:
        shown = "no event" if event is None else f"unknown event {event!r}"
        raise InvalidArgumentError(
            f"till hook: {shown}", next_step="use one of: " + ", ".join((*EVENTS, INSTALL))
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
        label=hook_label(event, agent, turn, tool),
        agent=agent,
        turn=turn,
        session=session,
        skip_unchanged=event == "post-tool",
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


def _install(ctx: Context, req: HookRequest) -> HookResult:
    from tillage.core.agent_hooks import CLAUDE_AGENT, HARNESSES
    from tillage.features.hooks.hooks import install_claude_code, install_generic, till_command
    from tillage.workspace.attach import require_workspace

    harness = req.agent or CLAUDE_AGENT
    if harness not in HARNESSES:
        raise InvalidArgumentError(
            f"till hook install: unknown agent {harness!r}",
            next_step="use --agent claude-code or --agent generic",
        )
    ws = require_workspace(ctx.settings.home, ctx.settings.folder, ctx.settings.user_home)
    till = till_command()
    if harness == CLAUDE_AGENT:
        written = install_claude_code(ws, till)
    else:
        written = install_generic(ws, till)
    note = None if written else f"tillage's {harness} hooks were already installed"
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
        note=note,
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
            "post-tool: only when something changed, turn-end), or install tillage's hooks "
            "into an agent's settings (install --agent claude-code | generic). Never exits 2; "
            "on a folder that is not attached it seals nothing and exits 0.",
        ),
        hook,
    ),
)
