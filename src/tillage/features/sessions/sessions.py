"""Agent sessions on disk: each session a linear chain of commits over the workspace's snapshots.

A commit is a fact in the publication log (`session_commit`), so it is as durable as a snapshot
and the index rebuilds it (INV-4); it names the snapshot that holds the session's state and the
commit before it, and counts what changed. Commits to a workspace's sessions are made under the
workspace lock, the same lock a seal takes, so two concurrent `record`s never fork a chain and
a commit always compares with the newest commit of its session.

The harness seam (`create_session_snapshot`, `session_log`, `follow_commits`) is the seed's
agent-vcs service on tillage's store: `start` begins a chain, `end` ends it, anything else
records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from tillage.core.sessions import (
    END,
    START,
    CommitRecord,
    ReadTree,
    change_totals,
    commit_body,
    description_problem,
    record_of,
    session_id_problem,
    sessions_to_remove,
    tree_changes,
)
from tillage.errors import echo
from tillage.features.sessions.errors import (
    BadCleanupLimitError,
    BadCommitIdError,
    BadDescriptionError,
    BadSessionIdError,
    CommitAmbiguousError,
    CommitNotFoundError,
)
from tillage.platform import clock
from tillage.store.errors import SnapshotNotFoundError
from tillage.store.rows import SessionCommitRow, SessionRow, SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Any

    from tillage.core.models import Change, Entry
    from tillage.core.progress import ProgressFn
    from tillage.store.events import LogFollower
    from tillage.workspace.rewind import RewindOutcome
    from tillage.workspace.seal import SealOptions

MIN_PREFIX = 6
_HEX = frozenset("0123456789abcdef")
# The description a commit gets when none is given, by what made it.
DEFAULT_DESCRIPTIONS = {START: "session started", "record": "recorded", END: "session ended"}
LABEL_CHARS = 100  # of a description, in the label of the snapshot a session seals


@dataclass(frozen=True)
class Recorded:
    """What a session call did: `commit` is the new commit, or, when `added` is False, the one
    that already held this state (the baseline of a session started again, or the session's
    newest commit when nothing changed since it). `sealed`: a snapshot was added."""

    commit: SessionCommitRow
    added: bool
    sealed: bool
    ended: bool = False


def check_session_id(session: str) -> str:
    """Returns `session` when it may name a session; session.bad_id (invalid_argument)
    otherwise, before anything is sealed or recorded."""
    problem = session_id_problem(session)
    if problem is not None:
        raise BadSessionIdError(f"{echo(session)} is not a session ID: {problem}")
    return session


def check_description(description: str | None) -> None:
    """Refuses a description that is too long or not text (session.bad_description)."""
    if description is None:
        return
    problem = description_problem(description)
    if problem is not None:
        raise BadDescriptionError(problem)


# -- making commits -------------------------------------------------------------------------


def create_session_snapshot(
    ws: Workspace,
    session_id: str,
    kind: str,
    description: str | None,
    *,
    agent: str | None = None,
) -> SessionCommitRow:
    """The harness seam (the seed's CreateSessionSnapshot): `start` begins the session's chain
    (idempotent: a started session answers its newest commit), `end` records and marks the session
    ended, anything else records. Returns the commit that holds the folder's state now."""
    if kind == START:
        return start(ws, session_id, description, agent=agent).commit
    return record(ws, session_id, description, agent=agent, end=kind == END).commit


def start(
    ws: Workspace, session: str, description: str | None = None, *, agent: str | None = None
) -> Recorded:
    """Begins a session: seals the folder (trigger `session`) and records the baseline, a
    commit with no change set. A session that has commits answers its newest commit, unchanged
    (the seed's NewChange on a started chain: where the session is now)."""
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import seal_result_locked

    check_session_id(session)
    check_description(description)
    with workspace_lock(ws):
        head = ws.store.session_head(ws.id, session)
        if head is not None:
            return Recorded(head, added=False, sealed=False)
        sealed = seal_result_locked(ws, _seal_options(session, START, description, agent))
        commit = _publish(ws, session, sealed.row, _describe(START, description), agent, None)
        return Recorded(commit, added=True, sealed=sealed.added)


def record(
    ws: Workspace,
    session: str,
    description: str | None = None,
    *,
    agent: str | None = None,
    end: bool = False,
) -> Recorded:
    """Seals the folder (publishing nothing when it equals the head) and extends the session's
    chain with a commit of what changed since its newest commit; when nothing did, answers that
    commit unchanged. A session without commits is started (this commit is its baseline).
    `end` also marks the session ended (once: ending an ended session changes nothing)."""
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import seal_result_locked

    check_session_id(session)
    check_description(description)
    kind = END if end else "record"
    with workspace_lock(ws):
        prev = ws.store.session_head(ws.id, session)
        options = _seal_options(session, kind, description, agent, skip=prev is not None)
        sealed = seal_result_locked(ws, options)
        done = chain_locked(ws, session, sealed.row, _describe(kind, description), agent, prev)
        done = Recorded(done.commit, done.added, sealed.added)
        return end_locked(ws, session, done) if end else done


def end_locked(ws: Workspace, session: str, done: Recorded) -> Recorded:
    """Marks `session` ended at `done.commit` (just recorded by a caller holding the workspace
    lock); once: ending an ended session whose head did not move publishes nothing."""
    row = ws.store.session(ws.id, session)
    if done.added or row is None or row.ended_ns is None:
        ws.store.publish(
            "session_ended",
            {"workspace": ws.id, "session": session, "commit": done.commit.id},
        )
    return Recorded(done.commit, done.added, done.sealed, ended=True)


def chain_locked(
    ws: Workspace,
    session: str,
    snapshot: SnapshotRow,
    description: str,
    agent: str | None,
    prev: SessionCommitRow | None,
    *,
    start_only: bool = False,
) -> Recorded:
    """Extends `session`'s chain (whose newest commit is `prev`) with a commit naming the
    already sealed `snapshot`, for a caller holding the workspace lock: the baseline when there
    is no `prev`, else a commit of the changes since `prev`'s snapshot, or `prev` itself when
    the trees are equal. With `start_only` an existing chain is left as it is."""
    if prev is not None and start_only:
        return Recorded(prev, added=False, sealed=False)
    if prev is None:
        commit = _publish(ws, session, snapshot, description, agent, None)
        return Recorded(commit, added=True, sealed=False)
    before = ws.store.snapshot(prev.snapshot)
    if before is not None and before.tree == snapshot.tree:
        return Recorded(prev, added=False, sealed=False)
    old = bytes.fromhex(before.tree) if before is not None else None
    changes = tree_changes(_reader(ws.store), old, bytes.fromhex(snapshot.tree))
    commit = _publish(ws, session, snapshot, description, agent, prev, changes)
    return Recorded(commit, added=True, sealed=False)


def _seal_options(
    session: str, kind: str, description: str | None, agent: str | None, *, skip: bool = False
) -> SealOptions:
    from tillage.workspace.seal import SealOptions

    label = f"session {kind}"
    if description:
        first = description.strip().splitlines()[0] if description.strip() else ""
        if first:
            cut = first[:LABEL_CHARS] + ("..." if len(first) > LABEL_CHARS else "")
            label += f": {cut}"
    return SealOptions(
        trigger="session", label=label, agent=agent, session=session, skip_unchanged=skip
    )


def _describe(kind: str, description: str | None) -> str:
    return description if description else DEFAULT_DESCRIPTIONS[kind]


def _publish(
    ws: Workspace,
    session: str,
    snapshot: SnapshotRow,
    description: str,
    agent: str | None,
    parent: SessionCommitRow | None,
    changes: list[Change] | None = None,
) -> SessionCommitRow:
    files, size = change_totals(changes or [])
    body = commit_body(
        CommitRecord(
            workspace=ws.id,
            session=session,
            parent=parent.id if parent is not None else None,
            snapshot=snapshot.id,
            description=description,
            created_ns=clock.now_ns(),
            file_count=snapshot.files,
            total_size=snapshot.bytes,
            changed_files=files,
            changed_total_size=size,
            baseline=parent is None,
            agent=agent,
        )
    )
    ws.store.publish("session_commit", body)
    found = ws.store.session_commit(str(body["id"]))
    assert found is not None
    return found


def _reader(store: Store) -> ReadTree:
    """Reads stored trees, each once per reader."""
    from tillage.core import codec

    cache: dict[bytes, list[Entry]] = {}

    def read(tree: bytes) -> list[Entry]:
        entries = cache.get(tree)
        if entries is None:
            entries = codec.decode_tree(store.read(tree))
            cache[tree] = entries
        return entries

    return read


# -- reading sessions ------------------------------------------------------------------------


def session_log(ws: Workspace, session: str) -> list[SessionCommitRow]:
    """A session's commits, oldest first; an unknown session has none (it is no error)."""
    check_session_id(session)
    return ws.store.session_commits(ws.id, session)


def list_sessions(ws: Workspace) -> list[SessionRow]:
    """The workspace's sessions, most recently updated first."""
    return ws.store.sessions(ws.id)


def resolve_commit(ws: Workspace, ref: str) -> SessionCommitRow:
    """Returns the commit `ref` names among the workspace's sessions: a full ID or a unique
    prefix of at least 6 hex digits (bad_commit_id, commit_not_found, commit_ambiguous)."""
    prefix = ref.strip().lower()
    if len(prefix) < MIN_PREFIX or len(prefix) > 64 or not set(prefix) <= _HEX:
        raise BadCommitIdError(
            f"{echo(ref)} is not a commit ID (64 hex characters, or a prefix of at least 6)"
        )
    matches = ws.store.session_commits_with_prefix(ws.id, prefix)
    if not matches:
        raise CommitNotFoundError(f"no session commit matches {echo(ref)}")
    if len(matches) > 1:
        raise CommitAmbiguousError(f"{echo(ref)} matches more than one session commit")
    found = ws.store.session_commit(matches[0])
    assert found is not None
    return found


def _tree_of(ws: Workspace, commit: SessionCommitRow) -> bytes:
    row = ws.store.snapshot(commit.snapshot)
    if row is None:
        raise SnapshotNotFoundError(
            f"commit {commit.id[:12]} names snapshot {commit.snapshot[:12]}, which this "
            "workspace's timeline no longer holds"
        )
    return bytes.fromhex(row.tree)


def commit_changes(
    ws: Workspace,
    commit: SessionCommitRow,
    to: SessionCommitRow | None = None,
    *,
    read: ReadTree | None = None,
) -> list[Change]:
    """What changed from `commit`'s parent to `commit` (none for a baseline), or with `to`
    from `commit` to `to`; as `till diff` lists the two snapshots."""
    read = read or _reader(ws.store)
    if to is not None:
        return tree_changes(read, _tree_of(ws, commit), _tree_of(ws, to))
    if commit.parent is None:
        return []
    parent = ws.store.session_commit(commit.parent)
    old = _tree_of(ws, parent) if parent is not None else None
    return tree_changes(read, old, _tree_of(ws, commit))


def changelog(ws: Workspace, session: str) -> list[tuple[SessionCommitRow, list[Change]]]:
    """Each commit of a session, oldest first, with what it changed from its parent."""
    read = _reader(ws.store)
    return [(c, commit_changes(ws, c, read=read)) for c in session_log(ws, session)]


def follow_commits(
    ws: Workspace,
    *,
    session: str | None = None,
    after_seq: int | None = None,
    poll_seconds: float = 0.1,
    stop: threading.Event | None = None,
) -> Iterator[SessionCommitRow]:
    """Yields each commit of the workspace's sessions (or of `session`) as it is created, read
    from the publication log like `till events --follow`: the commits after `after_seq` (a
    commit's `seq`; None: only those made after this call), then every new one within about
    `poll_seconds`, until `stop` is set. The starting point is fixed when this is called, not
    when iteration starts. It holds no lock and no index connection between polls, so it may
    run on a thread of its own beside the workspace's other users."""
    from tillage.store.events import LogFollower

    if session is not None:
        check_session_id(session)
    after = ws.store.last_seq() if after_seq is None else after_seq
    follower = LogFollower(ws.store.log, after)
    return _follow(follower, ws.id, session, poll_seconds, stop)


def _follow(
    follower: LogFollower,
    workspace_id: str,
    session: str | None,
    poll_seconds: float,
    stop: threading.Event | None,
) -> Iterator[SessionCommitRow]:
    while stop is None or not stop.is_set():
        for log_record in follower.records():
            if log_record.kind != "session_commit":
                continue
            body = log_record.body
            if body.get("workspace") != workspace_id or (
                session is not None and body.get("session") != session
            ):
                continue
            yield _row_of(log_record.seq, body)
            if stop is not None and stop.is_set():
                return
        if stop is not None:
            if stop.wait(poll_seconds):
                return
        else:
            time.sleep(poll_seconds)


def _row_of(seq: int, body: dict[str, Any]) -> SessionCommitRow:
    rec = record_of(body)
    return SessionCommitRow(
        id=str(body["id"]),
        workspace=rec.workspace,
        session=rec.session,
        seq=seq,
        parent=rec.parent,
        snapshot=rec.snapshot,
        description=rec.description,
        created_ns=rec.created_ns,
        file_count=rec.file_count,
        total_size=rec.total_size,
        changed_files=rec.changed_files,
        changed_total_size=rec.changed_total_size,
        baseline=rec.baseline,
        agent=rec.agent,
    )


# -- revert and cleanup ------------------------------------------------------------------------


@dataclass(frozen=True)
class Reverted:
    """A revert: the commit put back, the backup recorded first (None for a preview), and the
    rewind's outcome (its own `pre_rewind` undo and the changes)."""

    target: SessionCommitRow
    backup: SessionCommitRow | None
    outcome: RewindOutcome


def revert(
    ws: Workspace,
    ref: str,
    *,
    dry_run: bool = False,
    agent: str | None = None,
    on_progress: ProgressFn | None = None,
) -> Reverted:
    """Puts the whole folder back as it was at commit `ref`. First the present is recorded in
    that commit's session (a backup commit, or the session's newest when nothing changed since
    it), then the rewind machinery applies the commit's snapshot, sealing its own `pre_rewind`
    undo. `dry_run` only says what would change."""
    from tillage.workspace import rewind

    target = resolve_commit(ws, ref)
    snapshot = ws.store.snapshot(target.snapshot)
    if snapshot is None:
        _tree_of(ws, target)  # raises snapshot.not_found, naming both
        raise AssertionError("unreachable")
    if dry_run:
        return Reverted(target, None, rewind.preview(ws, snapshot, None))
    backup = record(
        ws, target.session, f"backup before revert to {target.id[:12]}", agent=agent
    ).commit
    outcome = rewind.apply(ws, snapshot, None, on_progress=on_progress)
    return Reverted(target, backup, outcome)


def cleanup(
    ws: Workspace,
    *,
    max_age_days: int | None,
    max_sessions: int | None,
    dry_run: bool = False,
) -> list[SessionRow]:
    """Removes whole sessions: those not updated for more than `max_age_days` days and those
    beyond the `max_sessions` most recently updated (None or 0: no such limit); returns them,
    most recently updated first. Only the sessions' commit records go (a `session_removed`
    fact each): their snapshots stay in the timeline, so no byte another session or the
    timeline needs is touched. `dry_run` removes nothing."""
    from tillage.workspace.locks import workspace_lock

    for name, value in (("--max-age-days", max_age_days), ("--max-sessions", max_sessions)):
        if value is not None and value < 0:
            raise BadCleanupLimitError(f"{name} must be 0 or more, not {value}")
    with workspace_lock(ws):
        rows = {r.id: r for r in ws.store.sessions(ws.id)}
        chosen = sessions_to_remove(
            [(r.id, r.updated_ns) for r in rows.values()],
            clock.now_ns(),
            max_age_days,
            max_sessions,
        )
        if not dry_run:
            for session in chosen:
                row = rows[session]
                ws.store.publish(
                    "session_removed",
                    {
                        "workspace": ws.id,
                        "session": session,
                        "commits": row.commits,
                        "head": row.head,
                    },
                )
    return [rows[s] for s in chosen]
