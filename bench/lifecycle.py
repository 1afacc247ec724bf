"""Benchmark the store lifecycle: `till gc` on a store of 200 hourly snapshots, against borg.

Issue 11: "gc time and peak RSS over a store with 200 snapshots of the mutating workload;
bytes reclaimed against what `du` says; the same store on disk against borg after `borg prune`
with an equivalent keep policy and `borg compact` (ratio, same run)".

1. Build. The standard workload (bench/workload.py, seed 0: ~5,000 files, ~244 MiB) in one
   folder, then --snapshots states of it: state 0 is the workload as generated, state i the
   state i-1 after `lifecycle_mutate` (the standard `workload.mutate` with seed i, plus churn
   in `node_modules/` and `dist/`, see below). Every state is sealed by tillage (TILLAGE_NOW =
   T0 + i hours; `till --json watch --no-daemon` for the first, `till --json snap` after) and
   archived by borg (`borg create --timestamp` with the same time, `.tillage` excluded), in
   turn, alternating which goes first; each timed until durable (wall time plus `sync`).
   Before state 0, `till estimate` (when this tillage has it) predicts the cold seal; the
   report sets its `seconds` beside state 0's real seal.
2. gc, paired. The two stores (and borg's cache, and the folder's `.tillage/`) are kept aside
   as they are after the build; every repeat starts from that copy. tillage: `till --json gc
   --yes` with TILLAGE_NOW = the last seal + 60 s, then once more (it must find nothing). borg:
   `borg prune` with the keep policy below, then `borg compact`. Each side timed until durable;
   peak RSS from wait4's rusage of each process; `du -sb` of each store before and after; the
   snapshots each keeps. Which side goes first alternates between repeats; figures are medians
   and ratios are ratios of medians.

The equivalent keep policy. tillage's default keeps every snapshot younger than 24 h, the
newest of each UTC hour to 7 d, of each UTC day to 90 d, of each ISO week after. borg prune
counts buckets instead of measuring ages, and its `--keep-within` is measured from borg's own
clock (it has no clock override), which is not the pinned TILLAGE_NOW. With one state per hour,
"every snapshot younger than 24 h" is the newest of each of the last 24 hours, so the keep-all
window folds into the hourly count: `--keep-hourly 168` (7 d of hours; with --step-hours H,
the states younger than 7 d at the gc's now, see borg_keep), then `--keep-daily 83`
(the days from 7 d to 90 d: borg does not count a day whose newest archive an earlier rule
already kept), `--keep-weekly -1` (every week, forever), with TZ=UTC (borg buckets by local
time). Where the two differ: borg also keeps the oldest archive when a rule found fewer buckets
than its count ("daily[oldest]"); the table says how many each kept.

The build is the long part (~6 minutes for 200 states on 2 cores); with --keep the scratch dir
keeps the stores as built, and --from-build DIR measures gc again on them without rebuilding.

Run ``python bench/lifecycle.py``; see bench/README.md ("Store lifecycle").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Sibling modules: `python bench/lifecycle.py` puts bench/ first on sys.path.
import workload
from measure import (
    BenchError,
    Proc,
    ToolMissingError,
    durable_sync,
    machine_facts,
    run_measured,
    tail,
    tree_bytes,
)
from runners import Borg, Tillage

MIB = 1024 * 1024
HOUR_S = 3600
BUSY_LOAD = 0.5  # 1-minute load average above which the machine was not quiet
GC_AFTER_LAST_S = 60  # the gc's TILLAGE_NOW: this long after the last seal
WEEK_S = 7 * 24 * HOUR_S
DAILY_DAYS = 90 - 7  # tillage keeps the newest of each UTC day from 7 d to 90 d
# Churn on top of the standard mutate, so the content-class byte windows have bytes to drop.
DEP_UPGRADES = 12  # node_modules packages upgraded per state (dependency class, 3 d)
BUILD_BYTES = 1536 * 1024  # dist/ bundle rebuilt per state (build class, 3 d)

Log = Callable[[str], None]


# -- the tools ----------------------------------------------------------------------------------


class PinnedTillage(Tillage):
    """tillage (bench/runners.py) with its clock pinned: every command runs with
    TILLAGE_NOW = `now` (epoch seconds) when set."""

    name = "tillage"

    def __init__(self, run_dir: Path, workspace: Path) -> None:
        super().__init__(run_dir, workspace)
        self.now: int | None = None

    def env(self) -> dict[str, str]:
        env = super().env()
        env.pop("TILLAGE_NOW", None)
        if self.now is not None:
            env["TILLAGE_NOW"] = str(self.now)
        return env

    def commands(self) -> set[str]:
        """The command names this tillage offers (`till contracts`), to find gc and estimate."""
        doc = self.till("contracts")
        return {v["command"] for v in doc.get("verbs", []) if isinstance(v, dict)}


class PinnedBorg(Borg):
    """borg (bench/runners.py) with TZ=UTC: borg prune buckets archives by local time, tillage
    by UTC."""

    def env(self) -> dict[str, str]:
        return {**super().env(), "TZ": "UTC"}

    def create(self, name: str, epoch_s: int) -> None:
        """One archive of the folder (without tillage's `.tillage/`), dated `epoch_s`."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s))
        self.exec(
            [
                "borg",
                "create",
                "-C",
                "zstd,3",
                "--exclude",
                ".tillage",
                "--timestamp",
                stamp,
                f"{self.store}::{name}",
                ".",
            ]
        )

    def archive_count(self) -> int:
        """How many archives the repository holds (`borg list --json`)."""
        proc = self.exec(["borg", "list", "--json", str(self.store)])
        return len(json.loads(proc.stdout)["archives"])


def borg_keep(step_s: int) -> list[str]:
    """borg prune's equivalent of tillage's default retention for one state every `step_s`
    (>= 1 h, so each state is alone in its UTC hour; see the module docstring): the states
    younger than 7 d at the gc's now as an hourly count (168 for one an hour), the days from 7 d
    to 90 d, every week after."""
    hourly = (WEEK_S - GC_AFTER_LAST_S) // step_s + 1
    return ["--keep-hourly", str(hourly), "--keep-daily", str(DAILY_DAYS), "--keep-weekly", "-1"]


# -- the mutating workload ----------------------------------------------------------------------


@dataclass
class Churn:
    """What one lifecycle_mutate() changed."""

    edited: int
    added: int
    deleted: int
    log_appended: int
    dependency_bytes: int
    build_bytes: int


def node_packages(root: Path) -> list[str]:
    """Workspace-relative dirs of the top-level packages in node_modules/ (scoped ones too)."""
    base = root / "node_modules"
    found: list[str] = []
    for entry in sorted(base.iterdir()):
        if entry.name == ".bin" or not entry.is_dir() or entry.is_symlink():
            continue
        if entry.name.startswith("@"):
            found += [f"node_modules/{entry.name}/{p.name}" for p in sorted(entry.iterdir())]
        else:
            found.append(f"node_modules/{entry.name}")
    return found


def upgrade_dependencies(root: Path, rng: random.Random, count: int) -> int:
    """Upgrades `count` packages in place, as `npm update` does: a new version in package.json,
    new index.js and lib/*.js; README, LICENSE and bin/ stay. Returns the bytes written."""
    written = 0
    packages = node_packages(root)
    for rel in rng.sample(packages, min(count, len(packages))):
        pkg = root / rel
        doc = json.loads((pkg / "package.json").read_text())
        doc["version"] = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 40)}"
        written += _write(pkg / "package.json", json.dumps(doc, indent=2) + "\n")
        written += _write(pkg / "index.js", _js(rng, rng.randint(200, 4000)))
        lib = pkg / "lib"
        if lib.is_dir():
            for module in sorted(lib.iterdir()):
                written += _write(module, _js(rng, rng.randint(300, 6000)))
    return written


def rebuild(root: Path, rng: random.Random, state: int) -> int:
    """A fresh build output in dist/ (the old one removed), as a bundler writes it: a
    content-hashed bundle and its manifest. Returns the bytes written."""
    dist = root / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir()
    bundle = f"app.{rng.getrandbits(32):08x}.js"
    written = _write(dist / bundle, _js(rng, BUILD_BYTES))
    manifest = {"state": state, "entry": bundle, "bytes": written}
    return written + _write(dist / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def lifecycle_mutate(root: Path, state: int) -> Churn:
    """State `state` from state-1: the standard mutate (seed `state`, so state 1 is the standard
    delta), DEP_UPGRADES packages upgraded in node_modules/, and dist/ rebuilt."""
    change = workload.mutate(root, seed=state)
    rng = random.Random(1_000_003 * state + 17)
    return Churn(
        edited=len(change.edited),
        added=len(change.added),
        deleted=len(change.deleted),
        log_appended=change.appended_bytes,
        dependency_bytes=upgrade_dependencies(root, rng, DEP_UPGRADES),
        build_bytes=rebuild(root, rng, state),
    )


def _js(rng: random.Random, size: int) -> str:
    """A CommonJS module of about `size` bytes (the workload's code-like text)."""
    return "'use strict';\n" + workload.code_text(rng, ".ts", size) + "\nmodule.exports = {};\n"


def _write(path: Path, text: str) -> int:
    data = text.encode()
    path.write_bytes(data)
    return len(data)


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Timed:
    """One timed step: its processes, and their wall time plus the `sync` after them."""

    seconds: float
    sync_s: float
    user_s: float
    sys_s: float
    max_rss_kib: int
    processes: list[dict[str, Any]]


def timed(tool: Tillage | Borg, action: Callable[[], object]) -> Timed:
    """Runs `action` (the tool's commands) after a `sync`, timed until durable, as
    bench/run.py's timed_step does."""
    os.sync()
    tool.procs = []
    action()
    sync_s = durable_sync()
    procs: list[Proc] = tool.procs
    return Timed(
        seconds=sum(p.seconds for p in procs) + sync_s,
        sync_s=sync_s,
        user_s=sum(p.user_s for p in procs),
        sys_s=sum(p.sys_s for p in procs),
        max_rss_kib=max((p.max_rss_kib for p in procs), default=0),
        processes=[
            {
                "command": shlex.join(p.argv),
                "seconds": p.seconds,
                "user_s": p.user_s,
                "sys_s": p.sys_s,
                "max_rss_kib": p.max_rss_kib,
            }
            for p in procs
        ],
    )


def du_bytes(paths: Sequence[Path]) -> int:
    """What `du -sb` says of these paths together (apparent bytes, directories included)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return 0
    out = subprocess.run(
        ["du", "-sb", "--total", *existing], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def allocated_bytes(paths: Sequence[Path]) -> int:
    """Bytes allocated on disk to the files under these paths (st_blocks)."""
    return tree_bytes(list(paths))[1]


def copy_aside(src: Path, dest: Path) -> None:
    """`cp -a` of a store (untimed), for the next repeat to start from."""
    if dest.exists():
        shutil.rmtree(dest)
    if src.exists():
        subprocess.run(["cp", "-a", str(src), str(dest)], check=True)


def put_back(saved: Path, dest: Path) -> None:
    """Replaces `dest` with the copy kept aside (untimed)."""
    shutil.rmtree(dest, ignore_errors=True)
    if saved.exists():
        subprocess.run(["cp", "-a", str(saved), str(dest)], check=True)


# -- the build ----------------------------------------------------------------------------------


@dataclass
class Build:
    """The states sealed and archived, and what it cost."""

    t0: int  # epoch seconds of state 0
    step_s: int
    states: int = 0
    seal: list[Timed] = field(default_factory=list)  # tillage, per state
    create: list[Timed] = field(default_factory=list)  # borg, per state
    borg_init: Timed | None = None
    churn: list[dict[str, int]] = field(default_factory=list)
    estimate: dict[str, Any] | None = None
    estimate_note: str = ""
    seconds: float = 0.0
    workload: dict[str, Any] = field(default_factory=dict)

    @property
    def last_seal(self) -> int:
        return self.t0 + (self.states - 1) * self.step_s

    def to_json(self) -> dict[str, Any]:
        """Everything the gc part and the report need, for --from-build."""
        doc = {k: v for k, v in vars(self).items() if k not in ("seal", "create", "borg_init")}
        doc["seal"] = [vars(s) for s in self.seal]
        doc["create"] = [vars(s) for s in self.create]
        doc["borg_init"] = vars(self.borg_init) if self.borg_init else None
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Build:
        plain = {k: v for k, v in doc.items() if k not in ("seal", "create", "borg_init")}
        plan = cls(**plain)
        plan.seal = [Timed(**s) for s in doc["seal"]]
        plan.create = [Timed(**s) for s in doc["create"]]
        plan.borg_init = Timed(**doc["borg_init"]) if doc["borg_init"] else None
        return plan


def first_midnight_after(epoch_s: float) -> int:
    """The next UTC midnight: state 0 is sealed at 00:30 of the next UTC day, so every seal is
    later than the files' real mtimes (a pinned clock behind them makes every file "racy" and
    rehashed) and the UTC hour and day buckets fall the same way on every run."""
    return (int(epoch_s) // 86_400 + 1) * 86_400


def build(
    args: argparse.Namespace, tl: PinnedTillage, bg: PinnedBorg, has: set[str], log: Log
) -> Build:
    """Generates the workload in the shared folder, then seals and archives every state."""
    ws = tl.ws
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {ws}")
    stats = workload.generate(ws, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    plan = Build(
        t0=first_midnight_after(time.time()) + 1800,
        step_s=int(args.step_hours * HOUR_S),
        workload={
            "files": stats.files,
            "bytes": stats.bytes,
            "seed": args.seed,
            "scale": args.scale,
        },
    )
    if "estimate" in has:
        tl.now = plan.t0
        plan.estimate = tl.till("estimate")
    else:
        plan.estimate_note = "`till estimate` is not in this tillage (not in `till contracts`)"
        log(plan.estimate_note)
    plan.borg_init = timed(bg, bg.init)
    started = time.perf_counter()
    for state in range(args.snapshots):
        if state:
            plan.churn.append(vars(lifecycle_mutate(ws, state)))
        at = plan.t0 + state * plan.step_s
        tl.now = at
        seal = tl.cold_seal if state == 0 else tl.delta_seal  # checks head.id / snapshot.id
        sides: list[tuple[str, Callable[[], object]]] = [
            ("tillage", seal),
            ("borg", lambda name=f"s{state:04d}", at=at: bg.create(name, at)),
        ]
        for name, action in sides if state % 2 == 0 else sides[::-1]:
            step = timed(tl if name == "tillage" else bg, action)
            (plan.seal if name == "tillage" else plan.create).append(step)
        plan.states = state + 1
        if plan.states in (1, 5, 10) or plan.states % 20 == 0 or plan.states == args.snapshots:
            spent = time.perf_counter() - started
            left = spent / plan.states * (args.snapshots - plan.states)
            log(
                f"state {plan.states}/{args.snapshots}: seal {plan.seal[-1].seconds:.2f} s, "
                f"borg create {plan.create[-1].seconds:.2f} s; {spent:.0f} s so far, "
                f"about {left:.0f} s left"
            )
    plan.seconds = time.perf_counter() - started
    return plan


# -- gc against prune + compact -----------------------------------------------------------------


@dataclass
class Side:
    """One side of one repeat: the timed step, the store before and after, what was kept."""

    step: Timed
    du_before: int
    du_after: int
    allocated_after: int
    kept: int
    doc: dict[str, Any] = field(default_factory=dict)  # tillage: gc's result
    again: Timed | None = None  # tillage: the second gc
    again_doc: dict[str, Any] = field(default_factory=dict)
    prune: Timed | None = None  # borg: the two commands apart
    compact: Timed | None = None


def tillage_gc(tl: PinnedTillage, now: int) -> Side:
    """`till --json gc --yes` at `now`, timed until durable; then once more."""
    tl.now = now
    paths = tl.store_paths()
    before = du_bytes(paths)
    docs: list[dict[str, Any]] = []
    step = timed(tl, lambda: docs.append(tl.till("gc", "--yes")))
    after = du_bytes(paths)
    again = timed(tl, lambda: docs.append(tl.till("gc", "--yes")))
    listed = tl.till("timeline", "-n", "1000000")["snapshots"]
    return Side(
        step=step,
        du_before=before,
        du_after=after,
        allocated_after=allocated_bytes(paths),
        kept=len(listed),
        doc=docs[0],
        again=again,
        again_doc=docs[1],
    )


def borg_prune_compact(bg: PinnedBorg, keep: list[str]) -> Side:
    """`borg prune` with the equivalent policy, then `borg compact`, timed until durable."""
    repo = str(bg.store)
    before = du_bytes([bg.store])
    os.sync()
    prune = timed(bg, lambda: bg.exec(["borg", "prune", *keep, repo]))
    compact = timed(bg, lambda: bg.exec(["borg", "compact", repo]))
    step = Timed(
        seconds=prune.seconds + compact.seconds,
        sync_s=prune.sync_s + compact.sync_s,
        user_s=prune.user_s + compact.user_s,
        sys_s=prune.sys_s + compact.sys_s,
        max_rss_kib=max(prune.max_rss_kib, compact.max_rss_kib),
        processes=prune.processes + compact.processes,
    )
    return Side(
        step=step,
        du_before=before,
        du_after=du_bytes([bg.store]),
        allocated_after=allocated_bytes([bg.store]),
        kept=bg.archive_count(),
        prune=prune,
        compact=compact,
    )


@dataclass
class Repeat:
    tillage: Side | None
    borg: Side
    first: str


def kept_aside(tl: PinnedTillage, bg: PinnedBorg) -> dict[str, Path]:
    """What a repeat starts from: both stores, borg's cache, the folder's `.tillage/`."""
    return {
        "home": tl.home,
        "ws-tillage": tl.ws / ".tillage",
        "borg-repo": bg.store,
        "borg-aux": bg.aux,
    }


def gc_repeats(
    args: argparse.Namespace,
    tl: PinnedTillage,
    bg: PinnedBorg,
    plan: Build,
    gc_ok: bool,
    saved: Path,
    log: Log,
    fresh: bool,
) -> list[Repeat]:
    """--repeat paired runs, each from the stores as the build left them (`saved`); `fresh`:
    the stores in place are still that state, so the first repeat needs no copy."""
    now = plan.last_seal + GC_AFTER_LAST_S
    keep = borg_keep(plan.step_s)
    repeats: list[Repeat] = []
    for n in range(args.repeat):
        if n or not fresh:
            for name, path in kept_aside(tl, bg).items():
                put_back(saved / name, path)
        order = ["tillage", "borg"] if n % 2 == 0 else ["borg", "tillage"]
        tillage: Side | None = None
        borg: Side | None = None
        for side in order:
            if side == "tillage" and gc_ok:
                tillage = tillage_gc(tl, now)
            elif side == "borg":
                borg = borg_prune_compact(bg, keep)
        assert borg is not None
        repeats.append(Repeat(tillage=tillage, borg=borg, first=order[0]))
        log(
            f"repeat {n + 1}: "
            + (
                f"till gc {tillage.step.seconds:.2f} s ({tillage.du_before / MIB:.1f} -> "
                f"{tillage.du_after / MIB:.1f} MiB, kept {tillage.kept}); "
                if tillage
                else "till gc NOT RUN; "
            )
            + f"borg prune+compact {borg.step.seconds:.2f} s ({borg.du_before / MIB:.1f} -> "
            f"{borg.du_after / MIB:.1f} MiB, kept {borg.kept})"
        )
    return repeats


def check_after(tl: PinnedTillage, repeats: list[Repeat]) -> dict[str, Any]:
    """What `till verify` says of the store after the last repeat's gc (reported, not fatal: a
    thinned snapshot lacks bytes on purpose), and whether a second gc still removed anything
    (fatal: gc must reach a fixed point)."""
    last = repeats[-1].tillage
    if last is None:
        return {}
    again = last.again_doc
    if again.get("snapshots_removed") or again.get("objects_removed"):
        raise BenchError(f"tillage: a second gc still removed something: {again!r}")
    argv = [*tl.command, "--repo", str(tl.ws), "--json", "verify"]
    done = run_measured(argv, cwd=tl.ws, env=tl.env())
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tillage: `till verify` printed no JSON: {tail(done.stdout)}") from exc
    return {
        "verify_ok": doc.get("ok"),
        "verify_exit": done.returncode,
        "verify_objects": doc.get("objects"),
        "verify_problems": len(doc.get("problems") or []),
        "verify_damaged_snapshots": len(doc.get("damaged_snapshots") or []),
        "verify_first_problems": (doc.get("problems") or [])[:3],
        "thinned": last.doc.get("snapshots_thinned"),
    }


# -- the report ---------------------------------------------------------------------------------


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def mib(value: float) -> str:
    return f"{value / MIB:.1f}"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else ""


def table(plan: Build, repeats: list[Repeat], states: int) -> list[list[str]]:
    """Rows of the gc table: measure, tillage, borg, tillage/borg, note."""
    rows: list[list[str]] = []
    bs = [r.borg for r in repeats]
    ts = [r.tillage for r in repeats if r.tillage is not None]
    have = len(ts) == len(repeats)

    def t(get: Callable[[Side], float]) -> float | None:
        return med([get(s) for s in ts]) if have else None

    def row(label: str, tv: float | None, bv: float | None, fmt: str, note: str = "") -> None:
        def show(v: float | None) -> str:
            if v is None:
                return ""
            return mib(v) if fmt == "mib" else f"{v:{fmt}}"

        shown = "NOT RUN" if tv is None and not have and fmt else show(tv)
        rows.append([label, shown, show(bv), ratio(tv, bv), note])

    row(
        "gc until durable (s)",
        t(lambda s: s.step.seconds),
        med([s.step.seconds for s in bs]),
        ".2f",
        "tillage: `till gc --yes`; borg: `borg prune` + `borg compact`",
    )
    row(
        "↳ user CPU (s)",
        t(lambda s: s.step.user_s),
        med([s.step.user_s for s in bs]),
        ".2f",
    )
    row("↳ sys CPU (s)", t(lambda s: s.step.sys_s), med([s.step.sys_s for s in bs]), ".2f")
    prune_s = med([s.prune.seconds for s in bs if s.prune])
    compact_s = med([s.compact.seconds for s in bs if s.compact])
    row(
        "↳ borg prune / compact apart (s)",
        None,
        None,
        "",
        f"prune {prune_s:.2f}, compact {compact_s:.2f}",
    )
    row(
        "peak RSS (MiB)",
        t(lambda s: s.step.max_rss_kib * 1024),
        max(s.step.max_rss_kib for s in bs) * 1024,
        "mib",
        "the largest ru_maxrss of the step's processes",
    )
    row(
        "store before (MiB, du -sb)",
        t(lambda s: s.du_before),
        med([s.du_before for s in bs]),
        "mib",
        f"{states} snapshots / archives",
    )
    row(
        "store after (MiB, du -sb)",
        t(lambda s: s.du_after),
        med([s.du_after for s in bs]),
        "mib",
        "the same run",
    )
    row(
        "↳ allocated on disk after (MiB)",
        t(lambda s: s.allocated_after),
        med([s.allocated_after for s in bs]),
        "mib",
    )
    row(
        "reclaimed, du -sb before - after (MiB)",
        t(lambda s: s.du_before - s.du_after),
        med([s.du_before - s.du_after for s in bs]),
        "mib",
    )
    if have:
        reported = med([s.doc.get("bytes_reclaimed", 0) for s in ts])
        before = med([s.doc.get("store_bytes_before", 0) for s in ts])
        after = med([s.doc.get("store_bytes_after", 0) for s in ts])
        du_delta = med([s.du_before - s.du_after for s in ts])
        row(
            "reclaimed, as `till gc` reports it (MiB)",
            reported,
            None,
            "mib",
            f"{reported / du_delta:.3f}x the du delta; it reports store "
            f"{mib(before)} -> {mib(after)} MiB"
            if du_delta
            else "",
        )
    row(
        "snapshots kept",
        t(lambda s: s.kept),
        med([s.kept for s in bs]),
        ".0f",
        f"of {states}",
    )
    if have:
        doc = ts[-1].doc
        row(
            "↳ removed / thinned / objects removed / packs rewritten",
            None,
            None,
            "",
            f"{doc.get('snapshots_removed')} / {doc.get('snapshots_thinned')} / "
            f"{doc.get('objects_removed')} / {doc.get('packs_rewritten')}",
        )
        row(
            "gc again, nothing to reclaim (s)",
            t(lambda s: s.again.seconds if s.again else 0.0),
            None,
            ".2f",
            "until durable; it removed "
            f"{ts[-1].again_doc.get('snapshots_removed')} snapshots, "
            f"{ts[-1].again_doc.get('objects_removed')} objects",
        )
    return rows


def build_rows(plan: Build) -> list[list[str]]:
    """Rows of the build table: what sealing and archiving the states cost."""
    rows: list[list[str]] = []
    seal = [s.seconds for s in plan.seal]
    create = [s.seconds for s in plan.create]
    init = plan.borg_init.seconds if plan.borg_init else 0.0
    rows.append(
        [
            "first state (s)",
            f"{seal[0]:.2f}",
            f"{init + create[0]:.2f}",
            ratio(seal[0], init + create[0]),
            "`till watch --no-daemon`; `borg init` + `borg create`",
        ]
    )
    later_seal, later_create = seal[1:], create[1:]
    if later_seal:
        rows.append(
            [
                "each later state, median (s)",
                f"{med(later_seal):.2f}",
                f"{med(later_create):.2f}",
                ratio(med(later_seal), med(later_create)),
                "`till snap`; `borg create`",
            ]
        )
        k = min(10, len(later_seal))
        rows.append(
            [
                f"↳ first {k} / last {k} later states (s)",
                f"{med(later_seal[:k]):.2f} / {med(later_seal[-k:]):.2f}",
                f"{med(later_create[:k]):.2f} / {med(later_create[-k:]):.2f}",
                "",
                "the log grows 4 MiB a state",
            ]
        )
    rows.append(
        [
            "peak RSS (MiB)",
            f"{max(s.max_rss_kib for s in plan.seal) / 1024:.1f}",
            f"{max(s.max_rss_kib for s in plan.create) / 1024:.1f}",
            ratio(max(s.max_rss_kib for s in plan.seal), max(s.max_rss_kib for s in plan.create)),
            "over every state",
        ]
    )
    return rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def estimate_line(plan: Build) -> str:
    """`till estimate`'s predicted cold seal against the first seal, timed until durable."""
    if plan.estimate is None:
        return f"estimate: NOT RUN ({plan.estimate_note})"
    predicted = plan.estimate.get("seconds")
    real = plan.seal[0].seconds
    if not isinstance(predicted, int | float):
        return f"estimate: no `seconds` in {plan.estimate!r}"
    return (
        f"`till estimate` predicted {predicted:.2f} s for the cold seal; the first seal took "
        f"{real:.2f} s until durable (predicted / real {predicted / real:.2f}x; it counted "
        f"{plan.estimate.get('files')} files, {mib(plan.estimate.get('bytes') or 0)} MiB)"
    )


def verify_line(checks: dict[str, Any]) -> str:
    """What `till verify` said of the store after gc."""
    if not checks:
        return "`till verify` after gc: NOT RUN"
    if checks["verify_ok"] is True:
        return f"`till verify` after gc: ok ({checks['verify_objects']} objects)"
    return (
        f"`till verify` after gc: NOT ok (exit {checks['verify_exit']}): "
        f"{checks['verify_problems']} problems, {checks['verify_damaged_snapshots']} damaged "
        f"snapshots (gc thinned {checks['thinned']}); first: "
        + "; ".join(str(p.get("problem")) for p in checks["verify_first_problems"])
    )


def report(results: dict[str, Any], plan: Build, repeats: list[Repeat]) -> str:
    machine = results["machine"]
    stats = results["workload"]
    states = plan.states
    lines = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']}, "
        f"{machine['python']}, {machine['platform']}, scratch dir on {machine['workdir_fs']}, "
        f"load {machine['load_before']:.2f} at start",
        f"Versions: {results['versions']['tillage']}; {results['versions']['borg']}",
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB (seed {stats['seed']}, "
        f"scale {results['scale']}); {states} states {plan.step_s // 60} min apart, "
        f"sealed from {results['first_seal']} to {results['last_seal']}; gc at "
        f"{results['gc_now']}; medians of {len(repeats)} paired repeats",
        f"borg policy: `borg prune {' '.join(results['borg_keep'])}` (TZ=UTC), then `borg compact`",
    ]
    if results["scale"] != 1.0:
        lines.append("NOTE: scale != 1.0 — a smoke run.")
    if machine["load_before"] > BUSY_LOAD:
        lines.append(
            f"WARNING: load average was {machine['load_before']:.2f} at the start: something "
            "else was using the CPU (paired, alternated runs share the drift)."
        )
    if not results["gc_available"]:
        lines.append(
            "NOTE: `till gc` is not in this tillage (`till contracts` lists no `gc`): "
            "tillage's gc rows are NOT RUN."
        )
    lines += [
        "",
        markdown(
            ["measure", "tillage", "borg", "tillage/borg", "note"], table(plan, repeats, states)
        ),
        "",
        f"Building the {states} states ({plan.seconds:.0f} s in all, mutations included), "
        "each timed until durable:",
        "",
        markdown(["step", "tillage", "borg", "tillage/borg", "note"], build_rows(plan)),
        "",
        estimate_line(plan),
        verify_line(results["checks"]),
    ]
    return "\n".join(lines)


def _iso(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def side_json(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "step": vars(side.step),
        "du_before": side.du_before,
        "du_after": side.du_after,
        "allocated_after": side.allocated_after,
        "kept": side.kept,
        "doc": side.doc,
        "again": vars(side.again) if side.again else None,
        "again_doc": side.again_doc,
        "prune": vars(side.prune) if side.prune else None,
        "compact": vars(side.compact) if side.compact else None,
    }


def benchmark(
    args: argparse.Namespace, scratch: Path, log: Log, resumed: bool
) -> tuple[str, dict[str, Any]]:
    """Builds the states (or takes those a kept run built: --from-build), measures gc against
    prune + compact, and returns the report and the results as data."""
    load_before = os.getloadavg()[0]
    ws = scratch / "ws"
    tl = PinnedTillage(scratch / "tillage", ws)
    bg = PinnedBorg(scratch / "borg", ws)
    saved = scratch / "saved"
    if resumed:
        plan = Build.from_json(json.loads((scratch / "build.json").read_text()))
        log(f"taking the {plan.states} states built in {scratch}")
        has = tl.commands()
    else:
        for tool in (tl, bg):
            tool.run_dir.mkdir(parents=True)
        ws.mkdir()
        has = tl.commands()
        plan = build(args, tl, bg, has, log)
        saved.mkdir()
        for name, path in kept_aside(tl, bg).items():
            copy_aside(path, saved / name)
        (scratch / "build.json").write_text(json.dumps(plan.to_json(), indent=2) + "\n")
    gc_ok = "gc" in has
    if not gc_ok:
        log("`till gc` is not in this tillage (`till contracts` lists no gc): tillage's gc rows")
        log("will say NOT RUN (rerun later with --from-build on a --keep scratch dir)")
    repeats = gc_repeats(args, tl, bg, plan, gc_ok, saved, log, fresh=not resumed)
    checks = check_after(tl, repeats) if gc_ok else {}
    results: dict[str, Any] = {
        "command": "python bench/lifecycle.py " + shlex.join(sys.argv[1:]),
        "machine": machine_facts(scratch, load_before),
        "versions": {"tillage": Tillage.version(), "borg": Borg.version()},
        "workload": plan.workload,
        "scale": plan.workload.get("scale", args.scale),
        "states": plan.states,
        "step_s": plan.step_s,
        "first_seal": _iso(plan.t0),
        "last_seal": _iso(plan.last_seal),
        "gc_now": _iso(plan.last_seal + GC_AFTER_LAST_S),
        "borg_keep": borg_keep(plan.step_s),
        "gc_available": gc_ok,
        "checks": checks,
        "build": plan.to_json(),
        "repeats": [
            {"first": r.first, "tillage": side_json(r.tillage), "borg": side_json(r.borg)}
            for r in repeats
        ],
    }
    text = report(results, plan, repeats)
    results["table"] = text
    return text, results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=200, help="states sealed (default 200)")
    parser.add_argument(
        "--step-hours", type=float, default=1.0, help="TILLAGE_NOW step per seal (default 1)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="paired gc runs (median reported)")
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workload (smoke runs)")
    parser.add_argument(
        "--workdir", type=Path, help="parent of the scratch dir (default: temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument(
        "--from-build",
        type=Path,
        metavar="DIR",
        help="skip the build: measure gc on the states a --keep run built in DIR (its scratch "
        "dir); the build's options are DIR's, the build table is that run's",
    )
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    args = parser.parse_args(argv)
    if args.snapshots < 1 or args.repeat < 1 or args.step_hours < 1:
        parser.error("--snapshots, --repeat and --step-hours must be >= 1")
    if args.step_hours * HOUR_S != int(args.step_hours * HOUR_S):
        parser.error("--step-hours must be a whole number of seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark: 0 when everything ran, 1 when a step failed, 3 when `till gc` is
    missing (the store was built and borg measured, tillage's gc was not)."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        Tillage.check_available()  # also compiles tillage's bytecode, as an install would
        Borg.check_available()
    except ToolMissingError as exc:
        log(f"FAILED: {exc}")
        return 1
    resumed = args.from_build is not None
    if resumed:
        scratch = args.from_build.resolve()
        if not (scratch / "build.json").is_file():
            log(f"FAILED: {scratch} holds no build.json (a scratch dir kept with --keep)")
            return 1
    else:
        if args.workdir:
            args.workdir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="tillage-lifecycle-", dir=args.workdir)).resolve()
    log(f"scratch dir: {scratch}")
    try:
        text, results = benchmark(args, scratch, log, resumed)
    except BenchError as exc:
        log(f"FAILED: {tail(str(exc), 40)}")
        if not resumed and not args.keep:
            log("(rerun with --keep to measure gc again with --from-build, without rebuilding)")
        return 1
    finally:
        if not args.keep and not resumed:
            shutil.rmtree(scratch, ignore_errors=True)
    print(text)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if results["gc_available"] else 3


if __name__ == "__main__":
    raise SystemExit(main())
