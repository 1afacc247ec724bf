"""The merge verb: three-way, gated on a check, landing nothing on a conflict."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.core.settle import parse_takes
from tillage.errors import BusyError, IntegrityError
from tillage.features.forks.errors import (
    ForkFolderMissingError,
    ForkNotFoundError,
    InvalidForkNameError,
    NotTheForkError,
)
from tillage.features.merge.errors import (
    MergeRequestError,
    MergeUnsettledError,
    NoCommonAncestorError,
    StalePreviewError,
)
from tillage.platform.errors import DiskFullError
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, ToolSpec, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import ChangeInfo, change_infos
from tillage.workspace.errors import MergeStoppedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.core.merge_plan import Conflict
    from tillage.core.models import Entry
    from tillage.features.merge.merge import MergeOutcome

# Exit status of a merge that completed but landed nothing (CONTRACT.md: global rules).
LANDED_NOTHING = 3


@dataclass(frozen=True)
class MergeRequest:
    name: str | None = param(
        "the fork to merge back (see `till forks`)", default=None, positional=True
    )
    snapshot: str | None = param(
        "merge this stored snapshot instead of a fork (head~N, an ID or unique prefix)",
        default=None,
        metavar="ID",
    )
    base: str | None = param(
        "with --snapshot: the common ancestor (found from both timelines when not given)",
        default=None,
        metavar="ID",
    )
    check: str | None = param(
        "a command that must pass on the merged result before anything lands; it runs "
        "through /bin/sh -c in a scratch copy, never in the workspace",
        default=None,
        metavar="CMD",
        command=True,
    )
    dry_run: bool = param(
        "plan and report from the live folders; seal, write and check nothing (its "
        "`preview_digest` is what --expect takes)",
        default=False,
    )
    expect: str | None = param(
        "land only the plan a --dry-run previewed with this `preview_digest`; a plan that "
        "changed since is refused (merge.stale_preview) and nothing lands",
        default=None,
        metavar="DIGEST",
    )
    take: tuple[str, ...] | None = param(
        "settle conflicts by taking a side: `ours` (the workspace) or `theirs`, then the paths "
        "whose version (and everything below them) is that side's, e.g. `--take theirs app.db "
        "--take ours src/`",
        default=None,
        metavar="SIDE PATH",
    )
    into_fork: bool = param(
        "merge the workspace into the fork instead, landing nothing here: what merges cleanly "
        "is written there, text conflicts with git-style markers, and what is left is listed; "
        "`till merge NAME` lands it once every conflict is settled",
        default=False,
    )


@dataclass(frozen=True)
class MergeSide:
    """One side of a conflicting path: what it is there, its object ID and size."""

    kind: str
    id: str
    size: int | None
    mode: str


@dataclass(frozen=True)
class MergeConflictInfo:
    """A path the two sides disagree about: its kind (ours first: `modify_delete` is changed
    here, deleted in theirs), why, and the path on each side (null: absent there)."""

    path: str
    kind: str
    reason: str
    base: MergeSide | None
    ours: MergeSide | None
    theirs: MergeSide | None


@dataclass(frozen=True)
class MergeResult:
    # The fork merged (null for --snapshot).
    fork: str | None
    landed: bool
    # The snapshot sealed after landing (trigger `merge`), or null.
    result: str | None
    changes: int
    conflicts: tuple[MergeConflictInfo, ...]
    check_output: str | None
    check_failed: bool
    check_exit_code: int | None
    # The three sides: the ancestor, the workspace sealed first (`pre_merge`), the other side.
    # A dry run seals nothing: a live side is its head when the folder is still exactly that
    # snapshot, null when it changed since.
    base: str
    ours: str | None
    theirs: str | None
    # What lands (or would land, or would have): each path as in `till diff`.
    changed: tuple[ChangeInfo, ...]
    # The paths merged line by line.
    merged: tuple[str, ...]
    dry_run: bool
    # True for `--into-fork`: `landed`, `result`, `changes` and `changed` are the fork's, and
    # `conflicts` what is left to settle there (markers to remove, or paths to --take).
    into_fork: bool
    # What the merge does (each landed path before and after, each conflict): a later
    # `merge --expect` with it lands only this plan.
    preview_digest: str
    # The snapshot a rewind goes back to, to undo a landed merge (its `pre_merge`); null when
    # nothing landed. `next`: the command that undoes a landed merge, or that runs it again
    # after a conflict or a failed check (with its --check), or that lands what a dry run
    # previewed (with --expect).
    undo: str | None
    next: str | None

    def exit_status(self) -> int:
        """3 when the merge landed nothing because of conflicts or a failed check (a merge into
        the fork that wrote its conflicts out there landed them: 0)."""
        if self.into_fork and self.landed:
            return 0
        return LANDED_NOTHING if self.conflicts or self.check_failed else 0

    def undo_plan(self, _req: MergeRequest) -> dict[str, Any] | None:
        """`till undo`: the folder back to its `pre_merge` seal, which also gives the fork
        its base back (a whole rewind to before a merge does: features/merge/unmerge.py)."""
        if not self.landed:
            return None
        if self.into_fork or self.undo is None:
            return {
                "kind": "none",
                "why": "a merge into a fork is undone in the fork (`till rewind` there)",
            }
        return {"kind": "rewind", "to": self.undo, "paths": None}

    def event_detail(self, _req: MergeRequest) -> dict[str, Any] | None:
        """None: a landed merge records its own `merged` (a fork's `fork_merged` fact, or an
        event appended with the merge's seal, so a merge finished by recovery has it too)."""
        return None


def _side(entry: Entry | None) -> MergeSide | None:
    if entry is None:
        return None
    from tillage.core.models import EntryKind

    kind = {
        EntryKind.FILE: "file",
        EntryKind.DIR: "dir",
        EntryKind.SYMLINK: "symlink",
        EntryKind.SPECIAL: "special",
    }[entry.kind]
    size = entry.size if entry.kind is not EntryKind.DIR else None
    return MergeSide(kind, entry.content.hex(), size, f"{entry.mode & 0o7777:04o}")


def _conflict_info(conflict: Conflict) -> MergeConflictInfo:
    return MergeConflictInfo(
        path=conflict.path,
        kind=str(conflict.kind),
        reason=conflict.reason,
        base=_side(conflict.base),
        ours=_side(conflict.ours),
        theirs=_side(conflict.theirs),
    )


def again(req: MergeRequest, *, expect: str | None = None) -> str:
    """The command that runs this merge again, with its check (a retry printed without it
    would land unchecked) and, after a preview, the digest that lands only what was shown."""
    import shlex

    words = ["till", "merge"]
    if req.name is not None:
        words.append(req.name)
    else:
        words += ["--snapshot", str(req.snapshot)]
        if req.base is not None:
            words += ["--base", req.base]
    if req.check is not None:
        words += ["--check", req.check]
    if req.take:
        words += ["--take", *req.take]
    if req.into_fork:
        words.append("--into-fork")
    if expect is not None:
        words += ["--expect", expect]
    return shlex.join(words)


def result_of(outcome: MergeOutcome, req: MergeRequest | None = None) -> MergeResult:
    """The verb's result from what the merge did; `next` is the command to run next (the undo
    of a landed merge, or the merge again, check and all)."""
    check = outcome.check
    undo = outcome.ours.id if outcome.landed and outcome.ours is not None else None
    nxt = f"till rewind {undo} --yes" if undo else None
    if outcome.into_fork:
        undo = None  # its undo is in the fork's timeline: `theirs`, rewound there
        nxt = (
            (again(replace(req, into_fork=False, take=None)) if req is not None else None)
            if outcome.landed
            else None
        )
    elif undo is None and req is not None:
        if outcome.dry_run and not outcome.conflicts and outcome.changes:
            nxt = again(replace(req, dry_run=False), expect=outcome.preview_digest)
        elif outcome.conflicts or (check is not None and check.exit_code != 0):
            nxt = again(req)
    return MergeResult(
        fork=outcome.fork,
        landed=outcome.landed,
        result=outcome.result.id if outcome.result is not None else None,
        changes=len(outcome.changes),
        conflicts=tuple(_conflict_info(c) for c in outcome.conflicts),
        check_output=check.output if check is not None else None,
        check_failed=check is not None and check.exit_code != 0,
        check_exit_code=check.exit_code if check is not None else None,
        base=outcome.base.id,
        ours=outcome.ours.id if outcome.ours is not None else None,
        theirs=outcome.theirs.id if outcome.theirs is not None else None,
        changed=change_infos(outcome.changes),
        merged=outcome.merged,
        dry_run=outcome.dry_run,
        preview_digest=outcome.preview_digest,
        into_fork=outcome.into_fork,
        undo=undo,
        next=nxt,
    )


def merge(ctx: Context, req: MergeRequest) -> MergeResult:
    from tillage.features.merge import merge as mg

    mg.check_request(req.name, req.snapshot, req.base)
    takes = parse_takes(req.take)
    if req.into_fork:
        from tillage.features.merge.into_fork import merge_into_fork

        assert req.name is not None  # _validate
        return result_of(
            merge_into_fork(
                ctx.workspace,
                req.name,
                takes=takes,
                dry_run=req.dry_run,
                on_progress=ctx.on_progress,
            ),
            req,
        )
    try:
        return result_of(_merge(ctx, req, takes), req)
    except StalePreviewError as exc:
        retry = again(replace(req, expect=None)) + " --dry-run"
        exc.next = f"preview it again with `{retry}` and apply its new digest"
        raise
    except MergeUnsettledError as exc:
        exc.next = (
            "remove the conflict markers in the fork's files, settle the rest with "
            f"--take ours PATH or --take theirs PATH, then run `{again(req)}` again"
        )
        raise


def _merge(ctx: Context, req: MergeRequest, takes: Any) -> Any:
    from tillage.features.merge import merge as mg

    launch = ctx.settings.launch
    if req.name is not None:
        outcome = mg.merge_fork(
            ctx.workspace,
            req.name,
            check=req.check,
            dry_run=req.dry_run,
            expect=req.expect,
            takes=takes,
            launch=launch,
            on_progress=ctx.on_progress,
        )
    else:
        assert req.snapshot is not None
        outcome = mg.merge_snapshot(
            ctx.workspace,
            req.snapshot,
            req.base,
            check=req.check,
            dry_run=req.dry_run,
            expect=req.expect,
            takes=takes,
            launch=launch,
            on_progress=ctx.on_progress,
        )
    return outcome


def _is_digest(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _validate(_ctx: Context, req: MergeRequest) -> None:
    from tillage.errors import InvalidArgumentError, echo
    from tillage.features.merge.merge import check_request

    check_request(req.name, req.snapshot, req.base)
    if req.expect is not None and not _is_digest(req.expect):
        raise InvalidArgumentError(
            f"--expect takes a merge's preview_digest (64 hex characters), not {echo(req.expect)}",
            next_step="preview the merge with --dry-run and pass its `preview_digest`",
        )
    parse_takes(req.take)
    if req.into_fork and (req.name is None or req.check is not None or req.expect is not None):
        raise MergeRequestError(
            "--into-fork merges the workspace into a fork: give the fork's NAME, without "
            "--snapshot, --check or --expect (run your checks in the fork)"
        )
    if req.check is not None and not req.check.strip():
        # A blank check would pass (`sh -c ''` exits 0): refused before anything is sealed.
        raise InvalidArgumentError(
            "--check is empty", next_step="give the check to run, e.g. --check 'make test'"
        )


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="merge.apply",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=MergeRequest,
            result=MergeResult,
            cli="merge",
            errors=(
                ForkNotFoundError,
                InvalidForkNameError,
                ForkFolderMissingError,
                NotTheForkError,
                MergeRequestError,
                NoCommonAncestorError,
                StalePreviewError,
                MergeUnsettledError,
                MergeStoppedError,
                SnapshotNotFoundError,
                SnapshotAmbiguousError,
                BadSnapshotIdError,
                BusyError,
                IntegrityError,
                DiskFullError,
            ),
            event="merged",
            validate=_validate,
            tool=ToolSpec(
                name="workspace_merge",
                rename=(("fork", "name"), ("preview", "dry_run")),
                doc="Merge a fork (or a stored snapshot) back into the workspace, three-way: "
                "the fork's base is the ancestor, the workspace is sealed first (`pre_merge`, "
                "the undo), the fork's head is sealed now. Text changed on both sides in "
                "different places merges line by line; any conflict, or a `check` that fails "
                "in a scratch copy of the result, lands nothing. A landed merge is undone by "
                "calling workspace_restore with its `undo` and `confirm: true`.",
                docs=(
                    ("name", "the fork to merge back (workspace_forks lists them)"),
                    ("snapshot", "merge this stored snapshot (its whole ID) instead of a fork"),
                    (
                        "base",
                        "with `snapshot`: the common ancestor (found from both timelines "
                        "when not given)",
                    ),
                    (
                        "dry_run",
                        "plan and report from the live folders; seal, write and check "
                        "nothing (its `preview_digest` is what `expect` takes)",
                    ),
                    (
                        "expect",
                        "land only the plan a preview showed with this "
                        "`preview_digest`; a plan that changed since is refused "
                        "(merge.stale_preview) and nothing lands",
                    ),
                    (
                        "take",
                        "settle conflicts by taking a side: `ours` (the workspace) or "
                        "`theirs`, then the paths whose version (and everything below them) is "
                        'that side\'s, e.g. ["theirs", "app.db", "ours", "src/"]',
                    ),
                    (
                        "into_fork",
                        "merge the workspace into the fork instead, landing nothing "
                        "here: what merges cleanly is written there, text conflicts with "
                        "git-style markers, and what is left is listed; merging the fork again "
                        "lands it once every conflict is settled",
                    ),
                ),
                guide="Give `check` (a command that must pass on the merged result, e.g. the "
                "tests) so nothing lands unless it passes; `preview: true` only reports, and "
                "its `preview_digest` given as `expect` lands exactly what it showed. "
                "Conflicts or a failed check land nothing and say why. To resolve conflicts, "
                "`into_fork: true` writes the merge into the fork (text conflicts with "
                'markers), then settle: edit the markers away, or `take: ["theirs", '
                '"PATH"]` (or "ours"), and merge again.',
            ),
            doc="Merge a fork (or a stored snapshot) back into the workspace, three-way: the "
            "fork's base is the ancestor, the workspace is sealed first (`pre_merge`, the "
            "undo), the fork's head is sealed now. Text changed on both sides in different "
            "places merges line by line; any conflict, or a --check that fails in a scratch "
            "copy of the result, lands nothing and exits 3. `till rewind UNDO --yes` undoes "
            "a landed merge.",
        ),
        merge,
    ),
)
