"""Replaying the publication log into the advisory index: what each kind of record (a fact)
makes of its tables. The index is a cache of the log (INV-4): replaying every record from the
start rebuilds it exactly."""

from __future__ import annotations

import json
import sqlite3

from tillage.store import index as ix
from tillage.store.publog import LogRecord
from tillage.store.rows import COMMIT_COLS, SESSION_COLS

# The command line opens a store on most calls: what only the type checker or a seal's
# compression pool needs is not imported at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def apply_record(c: sqlite3.Connection, r: LogRecord) -> None:
    """Applies one publication-log record to the index (inside the caller's transaction)."""
    b = r.body
    if r.kind == "attach":
        c.execute(
            "INSERT OR REPLACE INTO workspaces(id, root, attached_at, forgotten) VALUES (?,?,?,0)",
            (b["workspace"], b["root"], r.at_ns),
        )
    elif r.kind == "snapshot":
        c.execute(
            "INSERT OR REPLACE INTO snapshots VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                b["id"],
                b["workspace"],
                r.seq,
                b["sealed_at_ns"],
                b["trigger"],
                b["label"],
                b["parent"],
                b["tree"],
                b["files"],
                b["bytes"],
                b["grade"],
                b.get("agent"),
                b.get("turn"),
                b.get("session"),
                b.get("merged_from"),
            ),
        )
    elif r.kind == "fork":
        # A fork is attached where it was published, and linked to its parent by its base.
        c.execute(
            "INSERT OR REPLACE INTO workspaces(id, root, attached_at, forgotten) VALUES (?,?,?,0)",
            (b["workspace"], b["root"], r.at_ns),
        )
        c.execute(
            "INSERT OR REPLACE INTO forks VALUES (?,?,?,?,?,?,NULL,NULL,?,?)",
            (
                b["workspace"],
                b["parent"],
                b["name"],
                b["base"],
                b["root"],
                r.at_ns,
                b.get("port"),
                b.get("identity"),
            ),
        )
    elif r.kind == "fork_port":
        # A fork made before forks had ports gets one the first time a command runs in it.
        c.execute("UPDATE forks SET port=? WHERE workspace=?", (b["port"], b["workspace"]))
    elif r.kind == "fork_removed":
        # Its timeline stays (forgotten, not purged): its last state is restorable by ID.
        c.execute("UPDATE workspaces SET forgotten=1 WHERE id=?", (b["workspace"],))
        c.execute("DELETE FROM pathindex WHERE workspace=?", (b["workspace"],))
        c.execute("DELETE FROM pathshards WHERE workspace=?", (b["workspace"],))
        c.execute(
            "UPDATE forks SET removed_ns=?, last=? WHERE workspace=?",
            (r.at_ns, b.get("snapshot"), b["workspace"]),
        )
    elif r.kind in ("fork_merged", "fork_base"):
        # What landed is now common to both: the next merge (and the radar) counts the
        # fork's changes from the state that was merged. A `fork_base` puts it back when the
        # parent was rewound to before the merge (its changes are no longer common).
        c.execute("UPDATE forks SET base=? WHERE workspace=?", (b["base"], b["workspace"]))
        # A merge into the fork (`merge --into-fork`) leaves what is still to settle; any later
        # move of the base (a merge that landed, an undo) settles or replaces it.
        c.execute("DELETE FROM fork_pending WHERE workspace=?", (b["workspace"],))
        c.executemany(
            "INSERT OR REPLACE INTO fork_pending VALUES (?,?,?,?)",
            [(b["workspace"], p["path"], p["kind"], p["how"]) for p in b.get("pending") or ()],
        )
    elif r.kind == "claim":
        c.execute(
            "INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?,?,?)",
            (
                b["id"],
                b["family"],
                b["pattern"],
                b["owner"],
                b.get("expires_ns"),
                b.get("claimed_ns", r.at_ns),  # a claim put back by `till undo` keeps its time
                b.get("workspace"),  # the workspace that took it (None: a fact without it)
            ),
        )
    elif r.kind == "release":
        c.execute("DELETE FROM claims WHERE id=?", (b["id"],))
    elif r.kind in ("session_commit", "session_ended", "session_removed"):
        _apply_session(c, r)
    elif r.kind == "pin":
        c.execute("INSERT OR IGNORE INTO pins(snapshot) VALUES (?)", (b["snapshot"],))
    elif r.kind == "unpin":
        c.execute("DELETE FROM pins WHERE snapshot=?", (b["snapshot"],))
    elif r.kind == "settings":
        # One policy per store: a later line overrides the keys it names.
        merged = json.loads(ix.get_meta(c, "settings") or "{}")
        merged.update({k: v for k, v in b.items() if isinstance(v, dict)})
        ix.set_meta(c, "settings", json.dumps(merged, sort_keys=True))
    elif r.kind in ("gc", "drop"):  # drop: a never-made fork's first seal (forks/fork.py)
        _apply_gc(c, b)
    elif r.kind == "sync_ref":
        # What this machine last synced with a remote's ref: the remote's snapshot, and the
        # local one holding the same folder (gc keeps both).
        c.execute(
            "INSERT OR REPLACE INTO sync_refs VALUES (?,?,?,?,?,?)",
            (b["workspace"], b["remote"], b["ref"], b["snapshot"], b["local"], r.at_ns),
        )
    elif r.kind == "forget":
        # 1: forgotten, its timeline kept for a later attach; 2: purged.
        forgotten = 2 if b.get("purge") else 1
        if b.get("purge"):
            # A timeline never attached (a clone undone before it was placed) is purged too:
            # the records its seals left in packs are not a lost timeline to take back.
            c.execute(
                "INSERT OR IGNORE INTO workspaces(id, root, attached_at, forgotten) "
                "VALUES (?, '', ?, 2)",
                (b["workspace"], r.at_ns),
            )
        c.execute("UPDATE workspaces SET forgotten=? WHERE id=?", (forgotten, b["workspace"]))
        c.execute("DELETE FROM pathindex WHERE workspace=?", (b["workspace"],))
        c.execute("DELETE FROM pathshards WHERE workspace=?", (b["workspace"],))
        if b.get("purge"):
            # Its snapshots, and what it pulled, are dropped as a gc drops them: their records
            # wait in packs for the sweep, and no repair takes them for a lost timeline (a
            # pulled record names the workspace that sealed it, on another machine).
            c.execute(
                "INSERT OR IGNORE INTO dropped(snapshot) "
                "SELECT id FROM snapshots WHERE workspace IN (?, ?)",
                (b["workspace"], f"{b['workspace']}.sync"),
            )
            c.execute(
                "DELETE FROM pins WHERE snapshot IN (SELECT id FROM snapshots WHERE workspace=?)",
                (b["workspace"],),
            )
            c.execute("DELETE FROM snapshots WHERE workspace=?", (b["workspace"],))
            # A purged timeline's sessions name snapshots that are gone: they go too.
            c.execute("DELETE FROM session_commits WHERE workspace=?", (b["workspace"],))
            c.execute("DELETE FROM sessions WHERE workspace=?", (b["workspace"],))
            # And what it pulled (its sync timeline) and its sync refs: nothing keeps them.
            c.execute("DELETE FROM snapshots WHERE workspace=?", (f"{b['workspace']}.sync",))
            c.execute("DELETE FROM sync_refs WHERE workspace=?", (b["workspace"],))
    elif r.kind == "operation":
        # The operation log (store/oplog.py): one line per mutating verb, `till undo`'s basis.
        c.execute(
            "INSERT OR REPLACE INTO operations VALUES (?,?,?,?,?,?,?)",
            (
                b["id"],
                b.get("workspace"),
                r.seq,
                r.at_ns,
                b["verb"],
                b.get("undoes"),
                json.dumps(b, sort_keys=True),
            ),
        )
    # Any other kind (an `event`, or one a later version adds) holds no index state: the
    # index only moves past it (store/events.py reads events from the log itself).
    ix.set_meta(c, "log_offset", str(r.end_offset))
    ix.set_meta(c, "log_hash", r.hash)
    ix.set_meta(c, "log_seq", str(r.seq))


def _apply_session(c: sqlite3.Connection, r: LogRecord) -> None:
    """Applies a session fact: a commit extends its session's chain (and reopens an ended
    session), `session_ended` marks it ended, `session_removed` (cleanup) drops its commits
    up to the head the cleanup saw; snapshots are never touched (they are the timeline's)."""
    b = r.body
    workspace, session = b["workspace"], b["session"]
    if r.kind == "session_commit":
        if c.execute("SELECT 1 FROM session_commits WHERE id=?", (b["id"],)).fetchone():
            return  # applied already: the session's counts must not move twice
        c.execute(
            f"INSERT OR REPLACE INTO session_commits({COMMIT_COLS}) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                b["id"],
                workspace,
                session,
                r.seq,
                b.get("parent"),
                b["snapshot"],
                b.get("description") or "",
                b["created_ns"],
                b["file_count"],
                b["total_size"],
                b["changed_files"],
                b["changed_total_size"],
                1 if b.get("baseline") else 0,
                b.get("agent"),
            ),
        )
        c.execute(
            f"INSERT INTO sessions({SESSION_COLS}) VALUES (?,?,?,?,1,?,NULL) "
            "ON CONFLICT(workspace, id) DO UPDATE SET "
            "updated_ns=MAX(updated_ns, excluded.updated_ns), commits=commits+1, "
            "head=excluded.head, ended_ns=NULL",
            (workspace, session, b["created_ns"], b["created_ns"], b["id"]),
        )
    elif r.kind == "session_ended":
        c.execute(
            "UPDATE sessions SET ended_ns=?, updated_ns=MAX(updated_ns, ?) "
            "WHERE workspace=? AND id=?",
            (r.at_ns, r.at_ns, workspace, session),
        )
    else:
        head = c.execute("SELECT seq FROM session_commits WHERE id=?", (b.get("head"),)).fetchone()
        upto = head[0] if head is not None else r.seq
        c.execute(
            "DELETE FROM session_commits WHERE workspace=? AND session=? AND seq<=?",
            (workspace, session, upto),
        )
        left = c.execute(
            "SELECT COUNT(*), MIN(created_ns), MAX(created_ns) FROM session_commits "
            "WHERE workspace=? AND session=?",
            (workspace, session),
        ).fetchone()
        if not left[0]:
            c.execute("DELETE FROM sessions WHERE workspace=? AND id=?", (workspace, session))
        else:  # commits made after the cleanup looked (never under the lock it holds)
            c.execute(
                "UPDATE sessions SET commits=?, created_ns=?, updated_ns=? "
                "WHERE workspace=? AND id=?",
                (left[0], left[1], left[2], workspace, session),
            )


def _apply_gc(c: sqlite3.Connection, body: dict[str, Any]) -> None:
    """Applies a gc's decision: removed snapshots are gone (not_found; remembered in `dropped`
    so a repair never publishes their records again), thinned ones are graded `partial` and
    remember which classes of bytes they lost."""
    for snapshot in body.get("removed", ()):
        c.execute("DELETE FROM snapshots WHERE id=?", (snapshot,))
        c.execute("DELETE FROM pins WHERE snapshot=?", (snapshot,))
        c.execute("DELETE FROM thinned WHERE snapshot=?", (snapshot,))
        c.execute("INSERT OR IGNORE INTO dropped(snapshot) VALUES (?)", (snapshot,))
    for item in body.get("thinned", ()):
        snapshot = item["snapshot"]
        row = c.execute("SELECT classes FROM thinned WHERE snapshot=?", (snapshot,)).fetchone()
        classes = set(json.loads(row[0])) if row else set()
        classes.update(item.get("classes", ()))
        c.execute(
            "INSERT OR REPLACE INTO thinned(snapshot, classes) VALUES (?,?)",
            (snapshot, json.dumps(sorted(classes))),
        )
        c.execute("UPDATE snapshots SET grade='partial' WHERE id=?", (snapshot,))
