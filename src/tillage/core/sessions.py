"""Session changelogs, pure: what a session ID may be, a commit's canonical encoding and ID,
the changes between two stored trees (read only where they differ), a commit's change totals,
and which sessions a cleanup removes.

A session is a linear chain of commits over snapshots (docs/design/format.md, `session_commit`):
its first commit is the baseline (no change set); every later one names its parent and carries
the counts of what changed from the parent's snapshot to its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from tillage.core.ids import commit_id
from tillage.core.models import Change, ChangeKind, Entry
from tillage.core.treediff import diff_entry
from tillage.core.treewalk import walk

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A session ID is a harness's name for a conversation (Claude Code's is a UUID): any text of
# at most this many characters without control characters.
MAX_SESSION_CHARS = 200
# A commit's description is a person's or a model's message; longer is refused, not cut.
MAX_DESCRIPTION_CHARS = 4096
COMMIT_MAGIC = b"TSC1"

# Cleanup's defaults (CONTRACT: `till session cleanup`): sessions not updated for this many
# days go, and so does every session beyond this many most recently updated. A limit of 0 is
# no limit, as in the seed's `Cleanup(ctx, maxAgeDays, maxSessions)`.
DEFAULT_MAX_AGE_DAYS = 30
DEFAULT_MAX_SESSIONS = 100
DAY_NS = 86_400 * 1_000_000_000

# What a commit's kind may be for create_session_snapshot (the seed's snapshot types).
START, END = "start", "end"

# Reads a stored tree (by ID) as its entries.
ReadTree = Callable[[bytes], Sequence[Entry]]


def _control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000


def session_id_problem(text: str) -> str | None:
    """Says what is wrong with a session ID (empty, blank, too long, a control character or
    text that is not valid Unicode), or None when it is one."""
    if not text or not text.strip():
        return "a session ID cannot be empty"
    if len(text) > MAX_SESSION_CHARS:
        return f"a session ID has at most {MAX_SESSION_CHARS} characters, not {len(text)}"
    if any(_control(ch) for ch in text):
        return "a session ID cannot hold control characters"
    return None


def description_problem(text: str) -> str | None:
    """Says what is wrong with a commit's description (too long, or not valid Unicode);
    None when it may be recorded. Line breaks and tabs are allowed: it is a message."""
    if len(text) > MAX_DESCRIPTION_CHARS:
        return f"a description has at most {MAX_DESCRIPTION_CHARS} characters, not {len(text)}"
    if any(0xD800 <= ord(ch) < 0xE000 for ch in text):
        return "a description must be valid Unicode text"
    return None


@dataclass(frozen=True)
class CommitRecord:
    """What a session commit says about itself; its canonical encoding is what its ID hashes.

    `file_count`/`total_size` describe the commit's snapshot; `changed_files` counts the
    non-folder paths that differ from the parent's snapshot and `changed_total_size` sums their
    sizes: the new size of what was added, modified or re-typed, the old size of what was
    deleted (a baseline has neither).
    """

    workspace: str
    session: str
    parent: str | None
    snapshot: str
    description: str
    created_ns: int
    file_count: int
    total_size: int
    changed_files: int
    changed_total_size: int
    baseline: bool
    agent: str | None = None


def encode_commit(record: CommitRecord) -> bytes:
    """Encodes a commit as canonical JSON (sorted keys, no spaces) behind a magic."""
    body = json.dumps(asdict(record), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return COMMIT_MAGIC + body.encode()


def commit_body(record: CommitRecord) -> dict[str, Any]:
    """The `session_commit` log record's body: the commit's fields and its ID."""
    return {"id": commit_id(encode_commit(record)), **asdict(record)}


def record_of(body: Mapping[str, Any]) -> CommitRecord:
    """The commit a `session_commit` body holds (KeyError when a field is missing)."""
    agent = body.get("agent")
    return CommitRecord(
        workspace=str(body["workspace"]),
        session=str(body["session"]),
        parent=None if body["parent"] is None else str(body["parent"]),
        snapshot=str(body["snapshot"]),
        description=str(body["description"]),
        created_ns=int(body["created_ns"]),
        file_count=int(body["file_count"]),
        total_size=int(body["total_size"]),
        changed_files=int(body["changed_files"]),
        changed_total_size=int(body["changed_total_size"]),
        baseline=bool(body["baseline"]),
        agent=agent if isinstance(agent, str) else None,
    )


def body_holds_its_id(body: Mapping[str, Any]) -> bool:
    """Tells whether a `session_commit` body's `id` is the hash of its own fields."""
    try:
        return body.get("id") == commit_id(encode_commit(record_of(body)))
    except (KeyError, TypeError, ValueError):
        return False


# -- what changed between two stored trees ----------------------------------------------------


def tree_changes(read_tree: ReadTree, old: bytes | None, new: bytes | None) -> list[Change]:
    """Returns the changes from tree `old` to tree `new` (None: the empty tree), exactly as
    `till diff` lists them for the two snapshots (core/treediff.diff_manifests of both trees
    flattened), sorted by path; only subfolders whose tree IDs differ are read, so two states
    of a large workspace that differ in a few files cost a few tree reads."""
    changes: list[Change] = []
    for path, (before, after) in walk(read_tree, (old, new)):
        change = diff_entry(path, before, after)
        if change is not None:
            changes.append(change)
    changes.sort(key=lambda c: c.path)
    return changes


_NEW_BYTES = frozenset({ChangeKind.ADDED, ChangeKind.MODIFIED, ChangeKind.TYPE_CHANGED})


def change_totals(changes: Iterable[Change]) -> tuple[int, int]:
    """(changed files, their bytes): every change that is not a folder's counts (a folder has
    no size on either side; its contents are changes of their own), and the bytes are the new
    sizes of what was added, modified or re-typed and the old sizes of what was deleted (the
    seed's "aggregate size of changed files": a deletion changes what it removed)."""
    files = size = 0
    for change in changes:
        if change.old_size is None and change.new_size is None:
            continue
        files += 1
        if change.kind in _NEW_BYTES and change.new_size is not None:
            size += change.new_size
        elif change.kind is ChangeKind.DELETED and change.old_size is not None:
            size += change.old_size
    return files, size


# -- cleanup ----------------------------------------------------------------------------------


def sessions_to_remove(
    sessions: Sequence[tuple[str, int]],
    now_ns: int,
    max_age_days: int | None,
    max_sessions: int | None,
) -> list[str]:
    """Of `(session, updated_ns)` pairs, the sessions a cleanup removes, most recently updated
    first: those not updated for more than `max_age_days` days, and those beyond the
    `max_sessions` most recently updated (None or 0: no such limit)."""
    ordered = sorted(sessions, key=lambda s: (-s[1], s[0]))
    cutoff = now_ns - max_age_days * DAY_NS if max_age_days else None
    removed = []
    for rank, (session, updated_ns) in enumerate(ordered):
        too_many = bool(max_sessions) and rank >= (max_sessions or 0)
        too_old = cutoff is not None and updated_ns < cutoff
        if too_many or too_old:
            removed.append(session)
    return removed
