"""The operation log as the index holds it: one `operation` fact per mutating verb, read back.

An operation is a fact in the publication log like any other (INV-5), published right after the
verb's own facts, so the `operations` table is a cache the replay rebuilds (INV-4). Its body is
kept whole: what `till undo` needs is whatever the verb recorded, and a later version may
record more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tillage.store.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KIND = "operation"


@dataclass(frozen=True)
class OperationRow:
    """One recorded operation: `body` is the fact as published (id, verb, command, args,
    heads, agent, undo plan, undoes); `seq` its place in the log; `at_ns` when."""

    id: str
    workspace: str | None
    seq: int
    at_ns: int
    verb: str
    undoes: str | None
    body: dict[str, Any]


_COLS = "id, workspace, seq, at_ns, verb, undoes, body"


def _row(r: tuple[Any, ...]) -> OperationRow:
    return OperationRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]))


def operations(store: Store, workspace_id: str, limit: int | None = None) -> list[OperationRow]:
    """The workspace's operations and the store-wide ones (a gc), newest first."""
    sql = f"SELECT {_COLS} FROM operations WHERE workspace=? OR workspace IS NULL ORDER BY seq DESC"
    args: tuple[Any, ...] = (workspace_id,)
    if limit is not None:
        sql += " LIMIT ?"
        args = (workspace_id, limit)
    return [_row(r) for r in store.conn.execute(sql, args)]


def operation(store: Store, op_id: str) -> OperationRow | None:
    row = store.conn.execute(f"SELECT {_COLS} FROM operations WHERE id=?", (op_id,)).fetchone()
    return None if row is None else _row(row)


def with_prefix(store: Store, workspace_id: str, prefix: str) -> list[str]:
    """Up to two IDs of the workspace's (or store-wide) operations starting with `prefix`."""
    rows = store.conn.execute(
        "SELECT id FROM operations WHERE (workspace=? OR workspace IS NULL) "
        "AND id >= ? AND id < ? LIMIT 2",
        (workspace_id, prefix, prefix + "g"),
    )
    return [r[0] for r in rows]


def undone_by(store: Store, op_id: str) -> OperationRow | None:
    """The newest operation that undid `op_id` and is not itself undone, or None."""
    rows = store.conn.execute(
        f"SELECT {_COLS} FROM operations WHERE undoes=? ORDER BY seq DESC", (op_id,)
    ).fetchall()
    for r in rows:
        row = _row(r)
        if undone_by(store, row.id) is None:
            return row
    return None


def detached_workspace(store: Store, root: str) -> str | None:
    """The newest workspace a forget detached (or purged) at `root`: its operations stay, so
    its log can still be read there, and a forget undone."""
    row = store.conn.execute(
        "SELECT id FROM workspaces WHERE root=? AND forgotten>0 ORDER BY attached_at DESC LIMIT 1",
        (root,),
    ).fetchone()
    return None if row is None else str(row[0])
