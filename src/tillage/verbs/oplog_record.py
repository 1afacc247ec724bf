"""Recording one operation per mutating verb, in the one place every door passes (invoke.py).

What the invoker knows suffices for most of it: the verb, its arguments, the workspace's head
before and after, the agent, the time (the log line's). What an undo needs beyond that the
verb's result says with `undo_plan(request)`: a plan (`{"kind": ..., ...}`, verbs/undo.py
carries it out), a plan of kind `none` with the reason it cannot be undone (a gc), or None
when nothing changed (no operation is recorded then). A result without `undo_plan` records
an operation that cannot be undone. A dry run records nothing.
"""

from __future__ import annotations

import dataclasses
import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from tillage.store.store import Store
    from tillage.verbs.contract import Contract

ARG_LIMIT = 200  # characters of one argument kept in the log line; the digest covers all
SECRET_WORDS = ("key", "secret", "token", "password", "passphrase")


def head_of(store: Store, workspace_id: str) -> str | None:
    row = store.head(workspace_id)
    return None if row is None else row.id


def new_id() -> str:
    from tillage.platform.names import random_hex

    return random_hex(16)


def arguments(request: Any) -> dict[str, Any]:
    """The request as the log keeps it: every field, long values cut (the digest is whole),
    secrets never."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if any(w in f.name for w in SECRET_WORDS) and isinstance(value, (str, bytes)):
            value = "<hidden>"
        out[f.name] = _plain(value)
    return out


def digest(args: dict[str, Any]) -> str:
    import hashlib

    text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str):
        return value if len(value) <= ARG_LIMIT else value[:ARG_LIMIT] + "..."
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)[:ARG_LIMIT]


def plan_of(request: Any, result: Any) -> dict[str, Any] | None:
    """The result's undo plan; `{"kind": "none", ...}` for a result that states none."""
    if getattr(request, "dry_run", False) is True:
        return None
    of = getattr(result, "undo_plan", None)
    if not callable(of):
        return {"kind": "none", "why": "this command records no way to undo it"}
    plan = of(request)
    return None if plan is None else dict(plan)


def body(
    *,
    op_id: str,
    workspace_id: str | None,
    contract: Contract[Any, Any],
    request: Any,
    before: str | None,
    after: str | None,
    agent: str | None,
    plan: dict[str, Any],
    undoes: str | None = None,
) -> dict[str, Any]:
    args = arguments(request)
    return {
        "id": op_id,
        "workspace": workspace_id,
        "verb": contract.name,
        "command": contract.cli,
        "args": args,
        "args_digest": digest(args),
        "heads": {"before": before, "after": after},
        "agent": agent,
        "undo": plan,
        "undoes": undoes,
    }


def record(
    store: Store,
    workspace_id: str,
    agent: str | None,
    contract: Contract[Any, Any],
    request: Any,
    result: Any,
    before: str | None,
) -> None:
    """Publishes the operation a verb's success in `workspace_id` is (see the module
    docstring); `before`: the workspace's head before the verb ran."""
    from tillage.store.oplog import KIND

    if not dataclasses.is_dataclass(result):
        return  # a stream (`sync --follow`): each of its cycles is its own business
    plan = plan_of(request, result)
    if plan is None:
        return
    store.publish(
        KIND,
        body(
            op_id=new_id(),
            workspace_id=workspace_id,
            contract=contract,
            request=request,
            before=before,
            after=head_of(store, workspace_id),
            agent=agent,
            plan=plan,
        ),
    )


def record_storewide(
    home: Path, agent: str | None, contract: Contract[Any, Any], request: Any, result: Any
) -> None:
    """Publishes the operation of a verb with no workspace (a gc, a policy change): it is in
    every workspace's log, since it acted on the store they share. Nothing when no store
    exists (a verb that needs none ran without one)."""
    from tillage.store.oplog import KIND
    from tillage.store.store import Store

    if not dataclasses.is_dataclass(result) or not Store.exists(home):
        return
    plan = plan_of(request, result)
    if plan is None:
        return
    with Store.open(home) as store:
        if store.read_only:
            return
        store.publish(
            KIND,
            body(
                op_id=new_id(),
                workspace_id=None,
                contract=contract,
                request=request,
                before=None,
                after=None,
                agent=agent,
                plan=plan,
            ),
        )
