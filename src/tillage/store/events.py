"""The event stream is the publication log: reading it as events, and appending the happenings
that are not facts.

A fact already in the log is its own event (a `snapshot` line is `sealed`, `pin`/`unpin` are
`pinned`/`unpinned`); a happening that leaves no fact (a rewind, later a fork, a merge, a claim)
is appended as an `event` record, `{workspace, kind, detail}`, to the same hash-chained, fsynced
log. So an event is never lost or reordered relative to the fact it reports, there is one
durable order, and an event's cursor is its record's `seq`: exact and strictly increasing, kept
by `verify --repair` (publog.salvage).

Reading seeks by binary search over byte offsets (lines are in `seq` order), so `--after N` on a
log of 100,000 records reads a few dozen lines, not all of them; it holds one line at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tillage.errors import IntegrityError
from tillage.store.publog import GENESIS, LogRecord, PublicationLog, parse_line
from tillage.store.store import Store

# The record kind of happenings that are not facts (docs/design/format.md).
EVENT_RECORD = "event"

# Facts that are events by themselves: their record kind, and the event kind they are.
FACT_EVENTS = {"snapshot": "sealed", "pin": "pinned", "unpin": "unpinned"}
# Facts about universes, which name their workspace themselves: record kind, event kind, the
# body's key naming the workspace the event is about, and the body keys its detail repeats.
UNIVERSE_EVENTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "fork": ("forked", "parent", ("name", "root", "base", "workspace", "port")),
    "fork_removed": ("fork_removed", "parent", ("name", "workspace", "snapshot")),
    "fork_merged": ("merged", "parent", ("name", "workspace", "base", "result", "changes")),
    "claim": ("claimed", "workspace", ("id", "pattern", "owner", "expires_ns")),
    "release": ("released", "workspace", ("id", "pattern", "owner")),
}

# Facts about agent sessions (features/sessions/sessions.py): each is the event `session`,
# its detail's `action` telling which: `start` (a baseline commit), `commit`, `end` or
# `removed` (cleanup).
SESSION_RECORDS = ("session_commit", "session_ended", "session_removed")

# Every event kind (CONTRACT.md: `till events`); the ones that are not facts are appended.
KINDS = (
    "sealed",
    "rewound",
    "forked",
    "fork_removed",
    "merged",
    "conflict",
    "claimed",
    "released",
    "pinned",
    "unpinned",
    "session",
)
# `merged` is both: a fork's merge is its `fork_merged` fact, a stored snapshot's is appended.
APPENDED_KINDS = (
    frozenset(KINDS)
    - frozenset(FACT_EVENTS.values())
    - frozenset(kind for kind, _, _ in UNIVERSE_EVENTS.values())
) | {"merged"}

# Below this many bytes between the bounds, the seek reads lines in order instead of probing.
SCAN_BYTES = 16 << 10


@dataclass(frozen=True)
class Event:
    """One event: its record's seq (the cursor), when it was published, what, and where."""

    seq: int
    at_ns: int
    kind: str
    workspace: str | None  # the workspace ID; None when the store no longer knows it
    detail: dict[str, Any]


def announce(store: Store, workspace_id: str, kind: str, detail: dict[str, Any]) -> LogRecord:
    """Appends a happening that is not a fact to the log, durably, as an `event` record.

    Facts (`sealed`, `pinned`, `unpinned`) are refused: their own record is their event, and a
    second one would be a duplicate."""
    if kind not in APPENDED_KINDS:
        raise ValueError(f"{kind!r} is not an event kind that is appended")
    return store.publish(EVENT_RECORD, {"workspace": workspace_id, "kind": kind, "detail": detail})


def event_of(store: Store, record: LogRecord) -> Event | None:
    """Returns the event a log record is, or None for records that are no event (attach,
    forget, and kinds this version does not know)."""
    body = record.body
    if record.kind == EVENT_RECORD:
        kind, workspace, detail = body.get("kind"), body.get("workspace"), body.get("detail")
        if not isinstance(kind, str):
            return None
        return Event(
            record.seq,
            record.at_ns,
            kind,
            workspace if isinstance(workspace, str) else None,
            detail if isinstance(detail, dict) else {},
        )
    if record.kind in SESSION_RECORDS:
        workspace = body.get("workspace")
        return Event(
            record.seq,
            record.at_ns,
            "session",
            workspace if isinstance(workspace, str) else None,
            session_detail(record.kind, body),
        )
    universe = UNIVERSE_EVENTS.get(record.kind)
    if universe is not None:
        kind, about, keys = universe
        workspace = body.get(about)
        return Event(
            record.seq,
            record.at_ns,
            kind,
            workspace if isinstance(workspace, str) else None,
            {k: body.get(k) for k in keys},
        )
    kind = FACT_EVENTS.get(record.kind)
    snapshot = body.get("id" if record.kind == "snapshot" else "snapshot")
    if kind is None or not isinstance(snapshot, str):
        return None  # no event, or a fact without its snapshot (kept by a salvage): not shown
    detail = {"snapshot": snapshot, "short": snapshot[:12]}
    if record.kind == "snapshot":
        detail.update({k: body.get(k) for k in ("trigger", "label", "agent", "turn", "session")})
        workspace = body.get("workspace")
        return Event(
            record.seq,
            record.at_ns,
            kind,
            workspace if isinstance(workspace, str) else None,
            detail,
        )
    return Event(record.seq, record.at_ns, kind, _workspace_of(store, snapshot), detail)


def session_detail(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """The `session` event's detail for a session fact: what happened (`action`), to which
    session, and the commit's facts a reader wants without asking again."""
    if kind == "session_commit":
        commit = body.get("id")
        return {
            "action": "start" if body.get("baseline") else "commit",
            "session": body.get("session"),
            "commit": commit,
            "short": commit[:12] if isinstance(commit, str) else None,
            "parent": body.get("parent"),
            "snapshot": body.get("snapshot"),
            "description": body.get("description"),
            "changed_files": body.get("changed_files"),
            "changed_total_size": body.get("changed_total_size"),
        }
    if kind == "session_ended":
        commit = body.get("commit")
        return {
            "action": "end",
            "session": body.get("session"),
            "commit": commit,
            "short": commit[:12] if isinstance(commit, str) else None,
        }
    return {"action": "removed", "session": body.get("session"), "commits": body.get("commits")}


def _workspace_of(store: Store, snapshot: str) -> str | None:
    """The workspace a snapshot belongs to (a pin names only the snapshot). A snapshot the
    index has not seen yet (sealed while a follower was reading) is looked up again after the
    index catches up with the log; one of a purged workspace is no longer known."""
    query = "SELECT workspace FROM snapshots WHERE id=?"
    row = store.conn.execute(query, (snapshot,)).fetchone()
    if row is None:
        store.catch_up()
        row = store.conn.execute(query, (snapshot,)).fetchone()
    return None if row is None else str(row[0])


def workspace_root(store: Store, workspace_id: str) -> str | None:
    """The folder a workspace is (or was, once forgotten) attached at."""
    row = store.conn.execute(
        "SELECT root FROM workspaces WHERE id=? ORDER BY attached_at DESC LIMIT 1",
        (workspace_id,),
    ).fetchone()
    return None if row is None else str(row[0])


# -- reading the log from a cursor ---------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """Where a reader stands: the byte offset of the next line, the hash it must chain to,
    and the seq of the last record before it (0 at the start)."""

    offset: int
    prev: str
    seq: int


START = Position(0, GENESIS, 0)


def _line_at(f: Any, pos: int) -> tuple[int, bytes]:
    """Returns the first line that starts at or after byte `pos`: (its start, its bytes).
    The bytes are empty at the end of the file; a torn last line has no newline."""
    if pos == 0:
        f.seek(0)
        return 0, f.readline()
    f.seek(pos - 1)
    skipped = f.readline()  # the rest of the line holding byte pos - 1 (or just its newline)
    start = pos - 1 + len(skipped)
    return start, f.readline()


def seek(log: PublicationLog, after: int) -> Position:
    """Returns the position just after the record with the greatest seq <= `after`.

    Binary search over byte offsets: the log's lines are in seq order, so a probe finds a line
    start and reads its seq. Lines are checked as they are read (a probe's line must parse; the
    lines read in order must chain), so damage where the search lands is an integrity error.
    """
    if after <= 0:
        return START
    try:
        f = open(log.path, "rb")  # noqa: SIM115 (closed below; a generator is not wanted here)
    except FileNotFoundError:
        return START
    with f:
        size = os.fstat(f.fileno()).st_size
        # Invariant: every line starting before `lo` has seq <= after, and `lo` is a line start
        # whose predecessor is known (`lo_pos`); the first line starting at or after `hi` has
        # seq > after, or there is none.
        lo_pos, hi = START, size
        while hi - lo_pos.offset > SCAN_BYTES:
            mid = (lo_pos.offset + hi) // 2
            start, line = _line_at(f, mid)
            if not line.endswith(b"\n"):
                hi = mid  # the end, or a torn tail: nothing whole at or after mid
                continue
            end = start + len(line)
            record = _parse_unchained(line[:-1], end)
            if record.seq <= after:
                lo_pos = Position(end, record.hash, record.seq)
            else:
                hi = mid
        position = lo_pos
        for record in _read(f, position):
            if record.seq > after:
                break
            position = Position(record.end_offset, record.hash, record.seq)
        return position


def _parse_unchained(line: bytes, end: int) -> LogRecord:
    """Parses a line found by a probe, whose predecessor is not known: its own hash must hold
    for the `prev` it names, so a damaged line is still caught."""
    import json

    try:
        prev = json.loads(line)["prev"]
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"publication log line does not parse: {exc}") from exc
    return parse_line(line, str(prev), end)


def _read(f: Any, position: Position) -> Iterator[LogRecord]:
    """Yields the whole, chained records from `position` in an open log; a torn last line is
    not a record. A seq that does not increase is damage (readers seek by it)."""
    f.seek(position.offset)
    pos, prev, seq = position.offset, position.prev, position.seq
    for line in f:
        if not line.endswith(b"\n"):
            return  # torn tail: not published (INV-6)
        pos += len(line)
        record = parse_line(line[:-1], prev, pos)
        if record.seq <= seq:
            raise IntegrityError(
                f"publication log record {record.seq} comes after record {seq} (out of order)"
            )
        prev, seq = record.hash, record.seq
        yield record


class LogFollower:
    """Reads the log's records after a cursor, then, polled, each record appended since.

    Holds one position, never the records: memory stays flat however long it follows. A log
    rewritten under it (`verify --repair` replaces the file) is found again by seq, which the
    repair keeps, so a reader sees no duplicate and skips nothing that survived.
    """

    def __init__(self, log: PublicationLog, after: int) -> None:
        self.log = log
        self.after = after  # a cursor past the log's end holds back records up to it
        self.position = seek(log, after)
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.log.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino, st.st_size

    def log_size(self) -> int:
        """The log's size now, in bytes (0 when there is none yet)."""
        now = self._stat()
        return 0 if now is None else now[2]

    def has_more(self) -> bool:
        """Tells cheaply (one stat) whether the log holds bytes this reader has not read."""
        now = self._stat()
        if now is None:
            return False
        return now[:2] != (self._identity or now)[:2] or now[2] != self.position.offset

    def records(self) -> Iterator[LogRecord]:
        """Yields every whole record after the reader's position, moving it past each one."""
        now = self._stat()
        if now is None:
            return
        replaced = self._identity is not None and now[:2] != self._identity[:2]
        if replaced or now[2] < self.position.offset:
            # Rewritten: find our place again by seq.
            self.position = seek(self.log, max(self.position.seq, self.after))
        self._identity = now
        try:
            f = open(self.log.path, "rb")  # noqa: SIM115 (a generator closes it below)
        except FileNotFoundError:
            return
        with f:
            for record in _read(f, self.position):
                self.position = Position(record.end_offset, record.hash, record.seq)
                if record.seq > self.after:
                    yield record
