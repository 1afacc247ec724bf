"""Session changelogs: a linear chain of commits over snapshots per agent session.

`till session start | record | end | log | diff | revert | cleanup | changelog` and `till
sessions`. A commit names the snapshot that holds the session's state then, the commit before
it, and what changed; the commits are facts in the store's log (features/sessions/sessions.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.errors import BusyError, IntegrityError
from tillage.features.sessions.errors import (
    BadCleanupLimitError,
    BadCommitIdError,
    BadDescriptionError,
    BadSessionIdError,
    CommitAmbiguousError,
    CommitNotFoundError,
)
from tillage.platform.errors import DiskFullError
from tillage.store.errors import SnapshotNotFoundError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, ToolSpec, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import ChangeInfo, change_infos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Declared here (core/sessions.py says the same) so listing contracts imports no feature code.
DEFAULT_MAX_AGE_DAYS = 30
DEFAULT_MAX_SESSIONS = 100


@dataclass(frozen=True)
class CommitInfo:
    """The contract's commit object: one link of a session's chain."""

    id: str
    short: str
    # The commit before this one in its session; null for the baseline.
    parent: str | None
    session: str
    # The snapshot holding the folder as it was at this commit (`till show`, `till cat`).
    snapshot: str
    description: str
    created_at: str
    # Files and bytes of the whole folder at this commit.
    file_count: int
    total_size: int
    # Non-folder paths changed since the parent commit, and their sizes: the new size of those
    # added, modified or re-typed, the old size of those deleted; 0 for a baseline.
    changed_files: int
    changed_total_size: int
    is_baseline: bool
    agent: str | None


def commit_info(row: Any) -> CommitInfo:
    """Returns a store SessionCommitRow as the contract's commit object."""
    from tillage.platform.clock import rfc3339

    return CommitInfo(
        id=row.id,
        short=row.id[:12],
        parent=row.parent,
        session=row.session,
        snapshot=row.snapshot,
        description=row.description,
        created_at=rfc3339(row.created_ns),
        file_count=row.file_count,
        total_size=row.total_size,
        changed_files=row.changed_files,
        changed_total_size=row.changed_total_size,
        is_baseline=row.baseline,
        agent=row.agent,
    )


def _commit_words(c: CommitInfo) -> str:
    """A commit on one line for a model: short ID, time, what changed, its description."""
    from tillage.core.units import count, size

    if c.is_baseline:
        what = f"baseline ({count(c.file_count, 'file')}, {size(c.total_size)})"
    else:
        what = f"{count(c.changed_files, 'file')} changed (+{size(c.changed_total_size)})"
    first = c.description.strip().splitlines()[0] if c.description.strip() else ""
    return f"{c.short}  {c.created_at}  {what}" + (f'  "{first}"' if first else "")


def _change_lines(changes: tuple[ChangeInfo, ...]) -> list[str]:
    from tillage.verbs.tool_text import change_line
    from tillage.verbs.wire import to_wire

    return [change_line(to_wire(c)) for c in changes]


SESSION_DOC = "the session's ID: any text of 1 to 200 characters without control characters"
COMMIT_ERRORS = (BadCommitIdError, CommitNotFoundError, CommitAmbiguousError)


# -- start, record, end --------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionCommitRequest:
    session: str = param(SESSION_DOC, positional=True, metavar="SESSION")
    description: str | None = param(
        "what this commit is, for the changelog (at most 4096 characters)",
        default=None,
        short="-m",
        flag="--description",
        aliases=("--message",),
        metavar="DESC",
    )


@dataclass(frozen=True)
class SessionCommitResult:
    commit: CommitInfo
    # A new commit was made; false when the answer is one that already held this state (the
    # baseline of a session started again, the newest commit when nothing changed).
    added: bool
    # A new snapshot was sealed for it.
    sealed: bool
    # The session is marked ended (`session end`).
    ended: bool
    # `session start` of a session that has commits: `commit` is its newest, nothing was added.
    already_started: bool = False

    def model_text(self) -> str:
        """What a model reads back: which commit holds the folder now, and what it changed."""
        c = self.commit
        if self.added and c.is_baseline:
            text = f"Started session {c.session}: baseline commit {_commit_words(c)}."
        elif self.added:
            text = f"Recorded commit {_commit_words(c)} in session {c.session}."
        elif self.already_started:
            text = (
                f"Session {c.session} was already started; its newest commit is {_commit_words(c)}."
            )
        else:
            text = f"Nothing changed since commit {_commit_words(c)}; no commit was added."
        if self.ended:
            text += f" Session {c.session} is ended."
        return text + f" Commit ID: {c.id} (workspace_session_diff lists its changes)."


def _commit_result(done: Any, *, start: bool = False) -> SessionCommitResult:
    return SessionCommitResult(
        commit=commit_info(done.commit),
        added=done.added,
        sealed=done.sealed,
        ended=done.ended,
        already_started=start and not done.added,
    )


def session_start(ctx: Context, req: SessionCommitRequest) -> SessionCommitResult:
    from tillage.features.sessions.sessions import start

    done = start(ctx.workspace, req.session, req.description, agent=ctx.settings.agent)
    return _commit_result(done, start=True)


def session_record(ctx: Context, req: SessionCommitRequest) -> SessionCommitResult:
    from tillage.features.sessions.sessions import record

    return _commit_result(
        record(ctx.workspace, req.session, req.description, agent=ctx.settings.agent)
    )


def session_end(ctx: Context, req: SessionCommitRequest) -> SessionCommitResult:
    from tillage.features.sessions.sessions import record

    done = record(ctx.workspace, req.session, req.description, agent=ctx.settings.agent, end=True)
    return _commit_result(done)


# -- log, sessions, diff, changelog ------------------------------------------------------------


@dataclass(frozen=True)
class SessionLogRequest:
    session: str = param(SESSION_DOC, positional=True, metavar="SESSION")


@dataclass(frozen=True)
class SessionLogResult:
    session: str
    # Oldest first; empty for a session that has no commits (unknown, or removed by cleanup).
    commits: tuple[CommitInfo, ...]

    def model_text(self) -> str:
        """The commits, one a line, oldest first, with their full IDs for the next call."""
        from tillage.verbs.tool_text import fit

        if not self.commits:
            return f"Session {self.session} has no commits (workspace_session_start begins it)."
        head = f"Session {self.session}: {len(self.commits)} commit(s), oldest first:"
        lines = [f"- {_commit_words(c)}\n  id {c.id}" for c in self.commits]
        return fit(head, lines, "commit")


def session_log(ctx: Context, req: SessionLogRequest) -> SessionLogResult:
    from tillage.features.sessions.sessions import session_log as log

    rows = log(ctx.workspace, req.session)
    return SessionLogResult(session=req.session, commits=tuple(commit_info(r) for r in rows))


@dataclass(frozen=True)
class SessionsRequest:
    pass


@dataclass(frozen=True)
class SessionInfo:
    id: str
    commits: int
    created_at: str
    # When its newest commit was made (or it was ended, if later).
    updated_at: str
    ended: bool
    ended_at: str | None
    # Its newest commit's ID.
    head: str


@dataclass(frozen=True)
class SessionsResult:
    # Most recently updated first.
    sessions: tuple[SessionInfo, ...]

    def model_text(self) -> str:
        """One session a line, most recently updated first."""
        from tillage.verbs.tool_text import fit

        if not self.sessions:
            return "This workspace has no sessions (workspace_session_start begins one)."
        lines = [
            f"- {s.id}: {s.commits} commit(s), updated {s.updated_at}"
            + (", ended" if s.ended else "")
            + f", head {s.head[:12]}"
            for s in self.sessions
        ]
        return fit("Sessions, most recently updated first:", lines, "session")


def sessions(ctx: Context, req: SessionsRequest) -> SessionsResult:
    from tillage.features.sessions.sessions import list_sessions
    from tillage.platform.clock import rfc3339

    return SessionsResult(
        sessions=tuple(
            SessionInfo(
                id=r.id,
                commits=r.commits,
                created_at=rfc3339(r.created_ns),
                updated_at=rfc3339(r.updated_ns),
                ended=r.ended_ns is not None,
                ended_at=rfc3339(r.ended_ns) if r.ended_ns is not None else None,
                head=r.head,
            )
            for r in list_sessions(ctx.workspace)
        )
    )


@dataclass(frozen=True)
class SessionDiffRequest:
    commit: str = param(
        "a session commit: its ID or a unique prefix of at least 6", positional=True
    )
    to: str | None = param(
        "another commit to compare COMMIT to (default: compare COMMIT's parent to COMMIT)",
        default=None,
        metavar="COMMIT2",
    )


@dataclass(frozen=True)
class SessionDiffResult:
    changes: tuple[ChangeInfo, ...]
    # The direction: from `from_commit` (null: a baseline has nothing before it) to `to_commit`.
    from_commit: CommitInfo | None
    to_commit: CommitInfo

    def model_text(self) -> str:
        """The changed paths with their kinds and sizes."""
        from tillage.verbs.tool_text import fit

        to = self.to_commit
        if self.from_commit is None:
            return f"Commit {to.short} is the baseline of session {to.session}: no changes."
        head = f"From commit {self.from_commit.short} to {to.short}"
        if not self.changes:
            return head + ": no changes."
        return fit(f"{head}: {len(self.changes)} path(s):", _change_lines(self.changes), "path")


def session_diff(ctx: Context, req: SessionDiffRequest) -> SessionDiffResult:
    from tillage.features.sessions.sessions import commit_changes, resolve_commit

    ws = ctx.workspace
    commit = resolve_commit(ws, req.commit)
    if req.to is not None:
        dest = resolve_commit(ws, req.to)
        return SessionDiffResult(
            changes=change_infos(commit_changes(ws, commit, dest)),
            from_commit=commit_info(commit),
            to_commit=commit_info(dest),
        )
    parent = ws.store.session_commit(commit.parent) if commit.parent else None
    return SessionDiffResult(
        changes=change_infos(commit_changes(ws, commit)),
        from_commit=commit_info(parent) if parent is not None else None,
        to_commit=commit_info(commit),
    )


@dataclass(frozen=True)
class ChangelogCommit(CommitInfo):
    """A commit of the changelog: the commit object's fields and what it changed."""

    changes: tuple[ChangeInfo, ...]


@dataclass(frozen=True)
class SessionChangelogRequest:
    session: str = param(SESSION_DOC, positional=True, metavar="SESSION")


@dataclass(frozen=True)
class SessionChangelogResult:
    session: str
    # Oldest first; empty for a session that has no commits.
    commits: tuple[ChangelogCommit, ...]
    ended: bool

    def model_text(self) -> str:
        """The changelog as prose: each commit with its description and changed paths."""
        from tillage.verbs.tool_text import fit

        if not self.commits:
            return f"Session {self.session} has no commits (workspace_session_start begins it)."
        state = "ended" if self.ended else "open"
        head = f"Changelog of session {self.session} ({state}), oldest first:"
        lines = []
        for c in self.commits:
            info = CommitInfo(**{k: v for k, v in c.__dict__.items() if k != "changes"})
            lines.append(f"- {_commit_words(info)}  id {c.id}")
            lines.extend(_change_lines(c.changes))
        return fit(head, lines, "line")


def session_changelog(ctx: Context, req: SessionChangelogRequest) -> SessionChangelogResult:
    from tillage.features.sessions.sessions import changelog

    ws = ctx.workspace
    entries = []
    for row, changes in changelog(ws, req.session):
        info = commit_info(row)
        entries.append(ChangelogCommit(**info.__dict__, changes=change_infos(changes)))
    found = ws.store.session(ws.id, req.session)
    return SessionChangelogResult(
        session=req.session,
        commits=tuple(entries),
        ended=found is not None and found.ended_ns is not None,
    )


# -- revert and cleanup ------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRevertRequest:
    commit: str = param(
        "the session commit to put the folder back to: its ID or a unique prefix of at least 6",
        positional=True,
    )
    dry_run: bool = param("list what would change and change nothing", default=False)
    yes: bool = param("confirm: change the folder", default=False)


@dataclass(frozen=True)
class SessionRevertResult:
    # The backup of the present, recorded in the reverted commit's session before anything
    # changed (the session's newest commit when nothing had changed since it); null on a
    # dry run.
    commit: CommitInfo | None
    # The snapshot the folder was put back to (the reverted commit's).
    restored: str
    reverted_to: CommitInfo
    changes: tuple[ChangeInfo, ...]
    applied: bool
    # The snapshot the rewind sealed just before writing: `till rewind UNDO --yes` undoes it.
    undo: str | None
    # The exact command to run next: apply a dry run, or undo an applied revert.
    next: str

    def model_text(self) -> str:
        """What the revert did or would do, the backup, and how to undo it."""
        from tillage.verbs.tool_text import fit

        target = f"commit {self.reverted_to.short} of session {self.reverted_to.session}"
        lines = _change_lines(self.changes)
        if not self.applied:
            if not self.changes:
                return f"The folder already matches {target}: nothing to revert."
            head = f"Preview: reverting to {target} would change {len(self.changes)} path(s):"
            tail = "Nothing was changed. Call again with confirm: true to apply it."
            return fit(head, lines, "path", tail)
        head = f"Reverted the folder to {target}: {len(self.changes)} path(s) changed:"
        backup = f"commit {self.commit.short}" if self.commit is not None else "a backup"
        tail = (
            f"The state before was recorded as {backup} in that session and sealed as "
            f"snapshot {self.undo}; undo with workspace_restore of that snapshot "
            f"(`{self.next}`)."
        )
        return fit(head, lines, "path", tail)

    def undo_plan(self, _req: SessionRevertRequest) -> dict[str, Any] | None:
        """`till undo`: back to the seal the revert made before writing."""
        if not self.applied or self.undo is None:
            return None
        return {"kind": "rewind", "to": self.undo, "paths": None}

    def event_detail(self, req: SessionRevertRequest) -> dict[str, Any] | None:
        """The `rewound` event's detail (a revert is a rewind); None when nothing applied."""
        if not self.applied:
            return None
        return {
            "snapshot": self.restored,
            "short": self.restored[:12],
            "paths": None,
            "undo": self.undo,
            "changes": len(self.changes),
            "session": self.reverted_to.session,
            "commit": self.reverted_to.id,
        }


def session_revert(ctx: Context, req: SessionRevertRequest) -> SessionRevertResult:
    from tillage.features.sessions.sessions import revert

    done = revert(
        ctx.workspace,
        req.commit,
        dry_run=req.dry_run,
        agent=ctx.settings.agent,
        on_progress=ctx.on_progress,
    )
    outcome = done.outcome
    if outcome.applied:  # a whole-folder rewind: merges landed after its target are undone
        from tillage.features.merge.unmerge import restore_fork_bases, restore_own_base

        restore_fork_bases(ctx.workspace, outcome.target)
        restore_own_base(ctx.workspace, outcome.target)
    if outcome.applied and outcome.undo is not None:
        next_step = f"till rewind {outcome.undo} --yes"
    else:
        next_step = f"till session revert {done.target.id} --yes"
    return SessionRevertResult(
        commit=commit_info(done.backup) if done.backup is not None else None,
        restored=done.target.snapshot,
        reverted_to=commit_info(done.target),
        changes=change_infos(outcome.changes),
        applied=outcome.applied,
        undo=outcome.undo,
        next=next_step,
    )


def _validate_revert(ctx: Context, req: SessionRevertRequest) -> None:
    """A bad, unknown or ambiguous commit is answered before asking for --yes."""
    from tillage.features.sessions.sessions import resolve_commit

    resolve_commit(ctx.workspace, req.commit)


@dataclass(frozen=True)
class SessionCleanupRequest:
    max_age_days: int = param(
        "remove sessions not updated for more than N days (0: no age limit)",
        default=DEFAULT_MAX_AGE_DAYS,
        metavar="N",
    )
    max_sessions: int = param(
        "keep at most the N most recently updated sessions; remove the rest (0: no count limit)",
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
    )
    dry_run: bool = param("list the sessions that would be removed; remove nothing", default=False)
    yes: bool = param("confirm: remove them", default=False)


@dataclass(frozen=True)
class SessionCleanupResult:
    # Session IDs removed (or, on a dry run, that would be), most recently updated first.
    removed: tuple[str, ...]
    # Their commits, in all.
    commits_removed: int
    dry_run: bool
    # The limits applied: null for none (0 was asked for).
    max_age_days: int | None = None
    max_sessions: int | None = None
    # On a dry run that would remove sessions: the command that removes them; else null.
    next: str | None = None

    def model_text(self) -> str:
        """Which sessions went (or would go)."""
        if not self.removed:
            return "No session matched the limits: nothing was removed."
        verb = "Would remove" if self.dry_run else "Removed"
        names = ", ".join(self.removed)
        return f"{verb} {len(self.removed)} session(s) ({self.commits_removed} commits): {names}."


def session_cleanup(ctx: Context, req: SessionCleanupRequest) -> SessionCleanupResult:
    from tillage.features.sessions.sessions import cleanup

    rows = cleanup(
        ctx.workspace,
        max_age_days=req.max_age_days,
        max_sessions=req.max_sessions,
        dry_run=req.dry_run,
    )
    next_step = None
    if req.dry_run and rows:  # the same limits, confirmed (a default is left to be the default)
        words = ["till session cleanup"]
        if req.max_age_days != DEFAULT_MAX_AGE_DAYS:
            words.append(f"--max-age-days {req.max_age_days}")
        if req.max_sessions != DEFAULT_MAX_SESSIONS:
            words.append(f"--max-sessions {req.max_sessions}")
        next_step = " ".join([*words, "--yes"])
    return SessionCleanupResult(
        removed=tuple(r.id for r in rows),
        commits_removed=sum(r.commits for r in rows),
        dry_run=req.dry_run,
        max_age_days=req.max_age_days or None,
        max_sessions=req.max_sessions or None,
        next=next_step,
    )


def _validate_cleanup(ctx: Context, req: SessionCleanupRequest) -> None:
    for name, value in (("--max-age-days", req.max_age_days), ("--max-sessions", req.max_sessions)):
        if value < 0:
            raise BadCleanupLimitError(f"{name} must be 0 or more, not {value}")


def _needs_yes(req: Any) -> bool:
    return not req.dry_run and not req.yes


def _as_preview(req: Any) -> Any:
    return replace(req, dry_run=True)


def _as_confirmed(req: Any) -> Any:
    return replace(req, yes=True)


SEAL_ERRORS = (BadSessionIdError, BadDescriptionError, BusyError, DiskFullError, IntegrityError)
COMMIT_OBJECT = (
    "`commit` is {id, short, parent, session, snapshot, description, created_at, file_count, "
    "total_size, changed_files, changed_total_size, is_baseline}: `changed_files` counts the "
    "files changed since the parent commit and `changed_total_size` sums their sizes (the new "
    "size of those added, modified or re-typed, the old size of those deleted)."
)


# COMMIT_OBJECT as a model reads it (no `short`: a tool hands back whole IDs only).
TOOL_COMMIT_OBJECT = COMMIT_OBJECT.replace("{id, short, ", "{id, ")


def _commit_verb(
    name: str, cli: str, handler: Any, doc: str, tool_doc: str | None = None
) -> Verb[Any, Any]:
    return Verb(
        Contract(
            name=name,
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=SessionCommitRequest,
            result=SessionCommitResult,
            cli=cli,
            errors=SEAL_ERRORS,
            doc=doc + " " + COMMIT_OBJECT,
            tool=ToolSpec(doc=(tool_doc or doc) + " " + TOOL_COMMIT_OBJECT),
        ),
        handler,
    )


VERBS: tuple[Verb[Any, Any], ...] = (
    _commit_verb(
        "session.start",
        "session start",
        session_start,
        "Begin an agent session's changelog: seal the folder and record the session's baseline "
        "commit (no change set). Idempotent: starting a session that has commits answers its "
        "newest commit (`already_started`) and seals nothing.",
    ),
    _commit_verb(
        "session.record",
        "session record",
        session_record,
        "Record what changed in the folder since the session's last commit, as a new commit "
        "(call it after a step of work, with -m saying what the step was). When nothing "
        "changed it answers the last commit (`added` false) and seals nothing. A session with "
        "no commits is started by it.",
        "Record what changed in the folder since the session's last commit, as a new commit "
        "(call it after a step of work, with `description` saying what the step was). When "
        "nothing changed it answers the last commit (`added` false) and seals nothing. A "
        "session with no commits is started by it.",
    ),
    _commit_verb(
        "session.end",
        "session end",
        session_end,
        "Record like `session record` and mark the session ended (`till sessions` shows it); "
        "a later record continues it.",
        "Record like workspace_session_record and mark the session ended (workspace_sessions "
        "shows it); a later record continues it.",
    ),
    Verb(
        Contract(
            name="session.log",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=SessionLogRequest,
            result=SessionLogResult,
            cli="session log",
            errors=(BadSessionIdError,),
            doc="A session's commits, oldest first (an unknown session answers an empty list). "
            "Each commit's `snapshot` can be read with `till cat`; `till session diff COMMIT` "
            "lists what it changed.",
            tool=ToolSpec(
                doc="A session's commits, oldest first (an unknown session answers an empty "
                "list). Each commit's `snapshot` can be read with workspace_cat; "
                "workspace_session_diff with the commit's `id` lists what it changed."
            ),
        ),
        session_log,
    ),
    Verb(
        Contract(
            name="session.list",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=SessionsRequest,
            result=SessionsResult,
            cli="sessions",
            doc="This workspace's agent sessions, most recently updated first: `id`, `commits`, "
            "`created_at`, `updated_at`, `ended`, `head` (the newest commit's ID).",
        ),
        sessions,
    ),
    Verb(
        Contract(
            name="session.diff",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=SessionDiffRequest,
            result=SessionDiffResult,
            cli="session diff",
            errors=(*COMMIT_ERRORS, SnapshotNotFoundError),
            doc="What a session commit changed: each path with `kind` (added, modified, "
            "deleted, type_changed, mode_changed), `old_size` and `new_size`, from its parent "
            "commit (a baseline changed nothing), or with --to from COMMIT to COMMIT2. A commit "
            "is named by its ID or a unique prefix of at least 6.",
            tool=ToolSpec(
                doc="What a session commit changed: each path with `kind` (added, modified, "
                "deleted, type_changed, mode_changed), `old_size` and `new_size`, from its "
                "parent commit (a baseline changed nothing), or with `to` from `commit` to "
                "`to`. A commit is named by its whole ID.",
                docs=(
                    (
                        "to",
                        "another commit to compare `commit` to (default: compare the "
                        "commit's parent to it)",
                    ),
                ),
            ),
        ),
        session_diff,
    ),
    Verb(
        Contract(
            name="session.revert",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.DESTRUCTIVE,
            request=SessionRevertRequest,
            result=SessionRevertResult,
            cli="session revert",
            errors=(
                *COMMIT_ERRORS,
                SnapshotNotFoundError,
                BusyError,
                IntegrityError,
                DiskFullError,
            ),
            event="rewound",
            validate=_validate_revert,
            needs_confirmation=_needs_yes,
            preview=_as_preview,
            confirmed=_as_confirmed,
            doc="Put the whole folder back, byte-exact, as it was at a session commit. The "
            "present is recorded first as a backup commit in that commit's session (`commit`), "
            "and the rewind seals it once more as `undo`, so a revert can be undone with "
            "`till rewind UNDO --yes`. `restored` is the snapshot put back; a dry run lists "
            "`changes` and changes nothing.",
            tool=ToolSpec(
                doc="Put the whole folder back, byte-exact, as it was at a session commit. The "
                "present is recorded first as a backup commit in that commit's session "
                "(`commit`) and sealed as `undo`: calling workspace_restore with `undo` and "
                "`confirm: true` undoes the revert. `restored` is the snapshot put back."
            ),
        ),
        session_revert,
    ),
    Verb(
        Contract(
            name="session.cleanup",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.DESTRUCTIVE,
            request=SessionCleanupRequest,
            result=SessionCleanupResult,
            cli="session cleanup",
            errors=(BadCleanupLimitError, BusyError),
            validate=_validate_cleanup,
            needs_confirmation=_needs_yes,
            preview=_as_preview,
            confirmed=_as_confirmed,
            doc="Remove whole sessions: those not updated for more than --max-age-days "
            f"(default {DEFAULT_MAX_AGE_DAYS}) and those beyond the --max-sessions (default "
            f"{DEFAULT_MAX_SESSIONS}) most recently updated; 0 is no limit. Only their commit "
            "records go: no file of the folder changes, and the snapshots they named stay in "
            "the timeline, so nothing another session or the timeline needs is touched "
            "(a later `till gc` reclaims bytes no kept snapshot needs).",
            confirms="removes session records (no file and no snapshot changes)",
        ),
        session_cleanup,
    ),
    Verb(
        Contract(
            name="session.changelog",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=SessionChangelogRequest,
            result=SessionChangelogResult,
            cli="session changelog",
            errors=(BadSessionIdError, SnapshotNotFoundError),
            doc="A session's changelog: every commit oldest first, with its description, time "
            "and the files it changed (`changes`, as `till diff` lists them); an unknown "
            "session has no commits.",
            tool=ToolSpec(
                doc="A session's changelog: every commit oldest first, with its description, "
                "time and the files it changed (`changes`, as workspace_diff lists them); an "
                "unknown session has no commits."
            ),
        ),
        session_changelog,
    ),
)
