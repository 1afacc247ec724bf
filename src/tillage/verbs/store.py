"""Verbs about the store itself: verify (and repair) its objects and index."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context, finish_forks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class VerifyRequest:
    repair: bool = param("rebuild the index from the packs and drop damaged objects", default=False)


@dataclass(frozen=True)
class ProblemInfo:
    object: str
    problem: str


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    objects: int
    problems: tuple[ProblemInfo, ...]
    repaired: int
    damaged_snapshots: tuple[str, ...]
    fixed: tuple[ProblemInfo, ...]
    reclaimed_packs: int
    reclaimed_bytes: int
    finished_rewinds: tuple[str, ...]

    def undo_plan(self, _req: Any) -> dict[str, Any] | None:
        """A check changes nothing (no operation); a repair is recorded, not undoable."""
        if not self.repaired and not self.fixed:
            return None
        return {"kind": "none", "why": "a repair sets damage aside; it is not undone"}

    def exit_status(self) -> int:
        """A store that is not ok is a failed check: exit 1, with this document on stdout."""
        return 0 if self.ok else 1


def verify(ctx: Context, req: VerifyRequest) -> VerifyResult:
    from tillage.store.store import Store

    if not Store.exists(ctx.settings.home):
        return _only(())
    from tillage.store.controls import check_controls

    # Before the store is opened: a control file it reads (store.json) may be the damage.
    controls = check_controls(ctx.settings.home, repair=req.repair)
    if controls.blocking:  # the store's own shape is wrong: that is the whole report
        return _only(tuple(ProblemInfo(o, p) for o, p in controls.problems))
    with Store.open(ctx.settings.home, repairing=True) as store:
        finished, stuck, report = _checked(store, req.repair, controls, ctx.on_progress)
        pointers = _check_pointers(store, req.repair)
        orphans = _unclaimed(store) if req.repair or store.log_problem is None else []
    problems = [ProblemInfo(o, p) for o, p in (*controls.problems, *report.problems)]
    problems += [ProblemInfo(f"intent {ws}", why) for ws, why in stuck]
    problems += [ProblemInfo(o, p) for o, p in (*pointers.problems, *orphans)]
    fixed = [*controls.fixed, *report.fixed, *pointers.fixed]
    return VerifyResult(
        ok=not problems,
        objects=report.objects,
        problems=tuple(problems),
        repaired=report.repaired + len(controls.fixed) + len(pointers.fixed),
        damaged_snapshots=tuple(report.damaged_snapshots),
        fixed=tuple(ProblemInfo(o, p) for o, p in fixed),
        reclaimed_packs=report.reclaimed_packs,
        reclaimed_bytes=report.reclaimed_bytes,
        finished_rewinds=tuple(finished),
    )


def _only(problems: tuple[ProblemInfo, ...]) -> VerifyResult:
    """The report of a store that was not opened: no store yet, or one whose shape is wrong."""
    return VerifyResult(
        ok=not problems,
        objects=0,
        problems=problems,
        repaired=0,
        damaged_snapshots=(),
        fixed=(),
        reclaimed_packs=0,
        reclaimed_bytes=0,
        finished_rewinds=(),
    )


def _checked(
    store: Any, repair: bool, controls: Any, on_progress: Any
) -> tuple[list[str], list[tuple[str, str]], Any]:
    """Finishes interrupted rewinds, then checks (and repairs): a repair rebuilds the index and
    rewrites packs, so it runs alone, as a gc does (INV-14); a check only reads, beside seals,
    but never in the middle of a gc."""
    from tillage.store.check import check_store
    from tillage.store.errors import ControlFileDamagedError
    from tillage.workspace.recovery import sweep_leftovers

    if store.log_problem is None:
        # A killed fork's staging copy, or a killed fork-rm's trash; an intent that does not
        # read is in the report already (store/controls.py), and --repair set it aside.
        with contextlib.suppress(ControlFileDamagedError):
            finish_forks(store)
    with store.maintaining() if repair else store.sharing():
        finished, stuck = _finish_interrupted_rewinds(store, repair, controls.fixed)
        if not store.read_only:
            sweep_leftovers(store)
        return finished, stuck, check_store(store, repair=repair, on_progress=on_progress)


def _finish_interrupted_rewinds(
    store: Any, repair: bool, fixed: list[tuple[str, str]]
) -> tuple[list[str], list[tuple[str, str]]]:
    """Finishes every workspace's interrupted rewind before checking (INV-7): a verify must
    not call a store healthy while a folder waits half-rewound. Returns the folders finished,
    and (workspace, why) for intents that could not be finished; with `repair`, a record that
    is no landing's is set aside (added to `fixed`, with how to put the folder back)."""
    from pathlib import Path

    from tillage.errors import TillageError
    from tillage.store.control import set_aside
    from tillage.store.errors import ControlFileDamagedError
    from tillage.workspace.attach import Workspace
    from tillage.workspace.journal.intents import INTENT_PREFIX
    from tillage.workspace.recovery import recover_if_interrupted

    finished: list[str] = []
    stuck: list[tuple[str, str]] = []
    if store.read_only or store.log_problem is not None or not store.intents_dir.is_dir():
        return finished, stuck
    for intent in sorted(store.intents_dir.glob(f"{INTENT_PREFIX}*.json")):
        workspace_id = intent.name[len(INTENT_PREFIX) : -len(".json")]
        row = store.workspace(workspace_id)
        if row is None or not Path(row.root).is_dir():
            stuck.append((workspace_id, "an interrupted rewind waits for a folder that is gone"))
            continue
        try:
            if recover_if_interrupted(Workspace(row.id, Path(row.root), store)):
                finished.append(row.root)
        except ControlFileDamagedError as exc:
            if not repair:
                stuck.append((workspace_id, f"{exc.message}; `till verify --repair` sets it aside"))
                continue
            moved = set_aside(intent)
            fixed.append(
                (f"intent {workspace_id}", f"{exc.message}; set aside as {moved.name}: {exc.next}")
            )
        except TillageError as exc:
            stuck.append((workspace_id, exc.message))
    return finished, stuck


def _unclaimed(store: Any) -> list[tuple[str, str]]:
    """Timelines whose packs survive a log that lost every line naming their workspace: what
    no repair here can put back, and the command that does, in the folder. A record fetched
    from a remote names the pushing machine's workspace: it is not one of them."""
    from tillage.features.sync.seen import told_snapshots
    from tillage.store.lost import unclaimed

    return [
        (
            f"workspace {workspace_id}",
            f"the store's log no longer records this workspace, but its packs hold {count} "
            f"snapshots of it: run `till watch` in its folder (the one whose "
            f"`.tillage/workspace.json` names {workspace_id}) to take its timeline back",
        )
        for workspace_id, count in sorted(unclaimed(store, told_snapshots(store)).items())
    ]


def _check_pointers(store: Any, repair: bool) -> Any:
    """Each attached folder's pointer (`.tillage/workspace.json`) that cannot be read: a
    problem, or with `repair` set aside and written again from the store's catalog."""
    from pathlib import Path

    from tillage.core.paths import CONTROL_DIR
    from tillage.store.control import problem_of, set_aside
    from tillage.store.controls import ControlReport
    from tillage.workspace.attach import POINTER, write_pointer

    report = ControlReport()
    if store.read_only or store.log_problem is not None:
        return report
    rows = store.conn.execute("SELECT id, root FROM workspaces WHERE forgotten=0").fetchall()
    for workspace_id, root in rows:
        folder = Path(root) / CONTROL_DIR
        pointer = folder / POINTER
        if folder.is_symlink() or not folder.is_dir():
            continue  # a missing pointer is put back by the next command; a link is refused
        problem = problem_of(pointer)
        if problem is None:
            continue
        if not repair:
            report.problems.append(
                (str(pointer), f"{problem}; `till verify --repair` writes it again")
            )
            continue
        moved = set_aside(pointer)
        write_pointer(Path(root), workspace_id)
        report.fixed.append(
            (str(pointer), f"{problem}; written again (the damaged one is {moved.name})")
        )
    return report


VERBS = (
    Verb(
        Contract(
            name="store.verify",
            since=1,
            scope=Scope.NONE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=VerifyRequest,
            result=VerifyResult,
            cli="verify",
            doc="Read and check every object in the store (finishing any interrupted rewind "
            "first, and reclaiming packs that killed seals left behind), and every control "
            "file (store.json, remotes, intents, locks, folders' pointers); --repair salvages "
            "the log, rewrites damaged packs, rebuilds the index, writes a damaged store.json "
            "again, sets aside (as NAME.damaged) each control file it cannot read, saying what "
            "that loses and which command gets it back, and reports the state after repairing. "
            "Exits 1 when the store is not ok.",
        ),
        verify,
    ),
)
