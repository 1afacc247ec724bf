"""Each kind of undo, one small function over the verbs that already do the work.

An operation's `undo` plan (`{"kind": ..., ...}`, recorded by verbs/oplog_record.py from the
verb's result) names what puts the prior state back: a rewind to the seal the verb made
before it changed the folder (a rewind, a merge, a session revert, a pull), a pin or an unpin,
a claim released or put back, a folder attached again or forgotten again, forks removed or
restored. Carrying one out returns the plan that undoes *it* (its inverse), which the undo's
own operation records: undoing an undo does the first operation again. Every function here is
safe to run twice (the second run finds the work done), which is what lets the next command
finish an undo a crash interrupted (verbs/undo.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from tillage.verbs.invoke import Context
from tillage.verbs.views import ChangeInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UNDOABLE = (
    "rewind",
    "pin",
    "unpin",
    "claim",
    "release",
    "attach",
    "forget",
    "fork_rm",
    "fork_restore",
)


@dataclass(frozen=True)
class Done:
    """What carrying out (or previewing) a plan did: its inverse plan (None for a preview),
    the paths it changed (a rewind's), and one line for people."""

    inverse: dict[str, Any] | None
    summary: str
    changes: tuple[ChangeInfo, ...] = field(default=())
    # A rewinding kind's: the snapshot the folder was put back to, and the seal made first.
    restored: str | None = None
    sealed: str | None = None


def describe(plan: dict[str, Any], store: Any = None) -> str:
    """What carrying out `plan` does, in words (`till op log`, a preview)."""
    kind = plan.get("kind")
    if kind == "rewind":
        where = f" (only {', '.join(plan['paths'])})" if plan.get("paths") else ""
        return f"rewind the folder to {str(plan['to'])[:12]}{where}"
    if kind in ("pin", "unpin"):
        return f"{kind} snapshot {str(plan['snapshot'])[:12]}"
    if kind == "release":
        return f"release claim {str(plan['claim'])[:12]}"
    if kind == "claim":
        return f"put back claim {str(plan['claim'])[:12]}"
    if kind == "attach":
        return f"attach {plan['root']} again"
    if kind == "forget":
        return "forget this folder again (its timeline stays)"
    if kind in ("fork_rm", "fork_restore"):
        names = ", ".join(_fork_names(store, plan["forks"])) if store is not None else ""
        named = names or ", ".join(f[:12] for f in plan["forks"])
        if kind == "fork_rm":
            return f"remove fork {named}"
        return f"restore fork {named} from its last state"
    return str(plan.get("why") or "cannot be undone")


def _fork_names(store: Any, fork_ids: list[str]) -> list[str]:
    rows = [store.fork_of(f) for f in fork_ids]
    return [r.name for r in rows if r is not None]


def carry_out(
    ctx: Context, plan: dict[str, Any], *, dry_run: bool = False, sealed: str | None = None
) -> Done:
    """Carries out `plan` in `ctx.workspace` (or previews it). `sealed`: the seal of the
    present an earlier, interrupted run of this same plan made (its inverse's target)."""
    kind = plan["kind"]
    return _KINDS[kind](ctx, plan, dry_run, sealed)


def _rewind(ctx: Context, plan: dict[str, Any], dry_run: bool, sealed: str | None) -> Done:
    from tillage.verbs.rewind import RewindRequest, rewind

    paths = tuple(plan["paths"]) if plan.get("paths") else None
    done = rewind(ctx, RewindRequest(id=plan["to"], paths=paths, dry_run=dry_run, yes=True))
    summary = describe(plan)
    if dry_run:
        return Done(None, summary, done.changes, restored=plan["to"])
    back = sealed or done.undo
    inverse = {"kind": "rewind", "to": back, "paths": plan.get("paths")}
    return Done(inverse, summary, done.changes, restored=plan["to"], sealed=back)


def _pin(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.verbs.timeline import PinRequest, pin, unpin

    pinning = plan["kind"] == "pin"
    if not dry_run:
        (pin if pinning else unpin)(ctx, PinRequest(id=plan["snapshot"]))
    inverse = {"kind": "unpin" if pinning else "pin", "snapshot": plan["snapshot"]}
    return Done(None if dry_run else inverse, describe(plan))


def _release(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.features.radar.claim_errors import ClaimNotFoundError
    from tillage.verbs.radar import ReleaseRequest, release

    if not dry_run:
        # Released already (a run this one finishes), or expired meanwhile: done either way.
        with contextlib.suppress(ClaimNotFoundError):
            release(ctx, ReleaseRequest(claim=plan["claim"], owner=plan["owner"]))
    return Done(None if dry_run else {"kind": "claim", "claim": plan["claim"]}, describe(plan))


def _claim(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    """Puts a released claim back as it was taken: the same fact (ID, pattern, owner,
    expiry, time taken), found in the log."""
    from tillage.errors import NotFoundError
    from tillage.store.events import LogFollower

    store = ctx.workspace.store
    taken: dict[str, Any] | None = None
    for record in LogFollower(store.log, 0).records():
        if record.kind == "claim" and record.body.get("id") == plan["claim"]:
            taken = {**record.body, "claimed_ns": record.body.get("claimed_ns", record.at_ns)}
    if taken is None:
        raise NotFoundError(f"claim {plan['claim'][:12]} is not in the store's log any more")
    if not dry_run:
        store.publish("claim", taken)
    inverse = {"kind": "release", "claim": plan["claim"], "owner": taken["owner"]}
    return Done(None if dry_run else inverse, describe(plan))


def _attach(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.workspace.attach import attach

    if not dry_run:
        attached = attach(ctx.settings.home, Path(plan["root"]), ctx.settings.user_home)
        ctx.workspace = attached.workspace
    return Done(None if dry_run else {"kind": "forget"}, describe(plan))


def _forget(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.verbs.workspace import ForgetRequest, forget

    root = str(ctx.workspace.root)
    if not dry_run:
        forget(ctx, ForgetRequest())
    return Done(None if dry_run else {"kind": "attach", "root": root}, describe(plan))


def _fork_rm(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.verbs.forks import ForkRemoveRequest, fork_remove

    store = ctx.workspace.store
    summary = describe(plan, store)
    if not dry_run:
        for fork_id in plan["forks"]:
            row = store.fork_of(fork_id)
            if row is not None and row.removed_ns is None:
                fork_remove(ctx, ForkRemoveRequest(name=row.name, yes=True))
    inverse = {"kind": "fork_restore", "forks": list(plan["forks"])}
    return Done(None if dry_run else inverse, summary)


def _fork_restore(ctx: Context, plan: dict[str, Any], dry_run: bool, _sealed: str | None) -> Done:
    from tillage.features.forks.restore import restore_fork

    store = ctx.workspace.store
    summary = describe(plan, store)
    if not dry_run:
        for fork_id in plan["forks"]:
            restore_fork(ctx.workspace, fork_id)
    return Done(None if dry_run else {"kind": "fork_rm", "forks": list(plan["forks"])}, summary)


_KINDS = {
    "rewind": _rewind,
    "pin": _pin,
    "unpin": _pin,
    "release": _release,
    "claim": _claim,
    "attach": _attach,
    "forget": _forget,
    "fork_rm": _fork_rm,
    "fork_restore": _fork_restore,
}
