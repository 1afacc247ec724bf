"""Benchmark tillage against borg, restic and git on one generated workload.

Every tool gets its own copy of the same workload (bench/workload.py) and a
fresh store per repeat, and goes through the same steps:

1. cold seal     first complete snapshot (for the others: store init + first backup)
2. store size    bytes of files under the store after step 1
3. delta seal    after workload.mutate(): one more snapshot, as a whole process
4. store growth  store size after step 3 minus step 2
5. one-path      one edited file is clobbered, then only that path is restored
6. full rewind   everything inside the folder is deleted, then restored in place
                 (then the one-path rewind once more, right after the full restore)
7. peak RSS      the largest ru_maxrss of any child process of that tool

Each command is timed as a whole process (perf_counter around Popen + wait4)
plus an `os.sync()` after it, inside the timing, so every tool is timed until
its data is durable; its peak RSS comes from wait4's rusage.  Beside the full
restore, the physical limit is measured on the same tree: `cp -a` of it and a
`tar` extract of it, also timed until durable.  `till status` is timed against
a bare `python -c pass` start-up.  After every restore the folder is
compared file by file (sha256, exec bit, symlink target, directories) with what
was sealed; a tool that restores wrong bytes fails the run loudly.

Run ``python bench/run.py --repeat 3``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

# Sibling modules: `python bench/run.py` puts bench/ first on sys.path.
import workload
from measure import (
    BenchError,
    Proc,
    ToolMissingError,
    durable_sync,
    machine_facts,
    manifest,
    proc_cpu_seconds,
    proc_field,
    proc_write_bytes,
    run_measured,
    tree_bytes,
    verify,
    wipe,
)
from runners import TILLAGE_VARIANTS, TOOL_CLASSES, TOOLS, Tillage, TillageWatched, Tool

MIB = 1024 * 1024
# KEEP_UNTIL_THE_END: no folder of the run is deleted before the run is over. On ext4 without a
# journal (this VM's), an inode freed in the last 60 s is passed over by the allocator, which
# checks every such free inode of the group at every new file: a restore timed right after the
# previous tool's folders were deleted (about 11,000 inodes) paid for that tool's deletion, in
# sys time that varied 1-3 s from run to run. Each tool's own wipe stays: that is the scenario.
BUSY_LOAD = 0.5  # 1-minute load average above which the machine was not quiet
CLOBBER = b"clobbered by the benchmark before the one-path rewind\n"


STATUS_RUNS = 7  # paired `till status` / `python -c pass` runs per repeat
STATUS_TARGET = 3.0  # `till status` at most this many bare interpreter start-ups
HOOK_RUNS = 3  # `till hook turn-end` after 10 edits, per repeat
HOOK_TARGET_S = 0.3  # whole process, until durable
HOOK_EDITS = 10
LATENCY_RUNS = 3  # write-to-sealed measurements per repeat (watcher only)
IDLE_CPU_TARGET = 1.0  # percent of one core


@dataclass
class Step:
    """One timed step: summed wall and CPU time, and peak RSS, of its processes.

    `seconds` is the processes' wall time plus `sync_s`, the `os.sync()` after them: every
    step is timed until its data is durable, whichever tool leaves dirty pages behind."""

    seconds: float
    user_s: float
    sys_s: float
    max_rss_kib: int
    processes: list[dict[str, Any]]
    sync_s: float = 0.0


@dataclass
class RunResult:
    """Everything one tool produced in one repeat."""

    steps: dict[str, Step] = field(default_factory=dict)
    one_path: str = ""
    mutation: dict[str, int] = field(default_factory=dict)
    store_cold: tuple[int, int] = (0, 0)
    store_delta: tuple[int, int] = (0, 0)
    aux_bytes: int = 0
    # tillage only: median wall seconds of `till status` and of `python -c pass`, paired.
    status_s: float = 0.0
    bare_python_s: float = 0.0
    # tillage only: hooks and the watcher (see watch_figures()); absent keys were not measured.
    watch: dict[str, float] = field(default_factory=dict)


def timed_step(tool: Tool, action: Callable[[], None]) -> Step:
    """Run one step after flushing dirty pages (so no tool pays for earlier writes) and time
    it until durable: its processes' wall time plus the `os.sync()` after them."""
    os.sync()
    tool.procs = []
    action()
    sync_s = durable_sync()
    procs = tool.procs
    return Step(
        seconds=sum(p.seconds for p in procs) + sync_s,
        sync_s=sync_s,
        user_s=sum(p.user_s for p in procs),
        sys_s=sum(p.sys_s for p in procs),
        max_rss_kib=max((p.max_rss_kib for p in procs), default=0),
        processes=[
            {
                "command": shlex.join(p.argv),
                "returncode": p.returncode,
                "seconds": p.seconds,
                "user_s": p.user_s,
                "sys_s": p.sys_s,
                "max_rss_kib": p.max_rss_kib,
            }
            for p in procs
        ],
    )


def run_once(
    tool: Tool, master: Path, mutate_seed: int, log: Callable[[str], None], idle_s: float
) -> RunResult:
    """All steps for one tool on a fresh copy of the workload and a fresh store."""
    try:
        return _run_steps(tool, master, mutate_seed, log, idle_s)
    finally:
        tool.finish()


def _run_steps(
    tool: Tool, master: Path, mutate_seed: int, log: Callable[[str], None], idle_s: float
) -> RunResult:
    shutil.copytree(master, tool.ws, symlinks=True)
    result = RunResult()
    result.steps["init"] = timed_step(tool, tool.init)
    result.steps["cold_seal"] = timed_step(tool, tool.cold_seal)
    result.store_cold = tree_bytes(tool.store_paths())
    change = workload.mutate(tool.ws, seed=mutate_seed)
    result.mutation = {
        "edited": len(change.edited),
        "added": len(change.added),
        "deleted": len(change.deleted),
        "appended_bytes": change.appended_bytes,
    }
    result.steps["delta_seal"] = timed_step(tool, tool.delta_seal)
    result.store_delta = tree_bytes(tool.store_paths())
    result.aux_bytes = tree_bytes(tool.aux_paths())[0]
    expected = manifest(tool.ws, tool.excluded)
    # One edited file clobbered and put back while the folder is otherwise as sealed: the
    # everyday case (an agent broke one file), for every tool alike.
    target = result.one_path = change.edited[0]
    (tool.ws / target).write_bytes(CLOBBER)
    result.steps["path_rewind"] = timed_step(tool, lambda: tool.path_restore(target))
    verify(tool.ws, expected, tool.excluded, f"{tool.name} one-path rewind of {target}")
    wipe(tool.ws)
    result.steps["full_rewind"] = timed_step(tool, tool.full_restore)
    verify(tool.ws, expected, tool.excluded, f"{tool.name} full rewind")
    # The same again right after the full restore: every folder is new to a watcher then.
    (tool.ws / target).write_bytes(CLOBBER)
    result.steps["path_rewind_after_full"] = timed_step(tool, lambda: tool.path_restore(target))
    verify(tool.ws, expected, tool.excluded, f"{tool.name} one-path rewind after the full")
    if isinstance(tool, Tillage):
        result.status_s, result.bare_python_s = status_vs_bare(tool)
        result.watch = watch_figures(tool, change.edited, idle_s, log)
    log(
        " ".join(f"{name}={step.seconds:.2f}s" for name, step in result.steps.items())
        + f" store={result.store_cold[0] / MIB:.1f}+"
        f"{(result.store_delta[0] - result.store_cold[0]) / MIB:.1f}MiB"
    )
    return result


def status_vs_bare(tool: Tillage) -> tuple[float, float]:
    """Median wall seconds of `till status` on the benchmark's workspace and of a bare
    `python -c pass`, run in turn (A B A B ...) so drift hits both; one warm-up each."""
    status = [*tool.command, "--repo", str(tool.ws), "--json", "status"]
    bare = [tool.command[0], "-c", "pass"]
    samples: dict[str, list[float]] = {"status": [], "bare": []}
    for n in range(STATUS_RUNS + 1):
        for key, argv in (("status", status), ("bare", bare)):
            proc = run_measured(argv, cwd=tool.ws, env=tool.env())
            if proc.returncode != 0:
                raise BenchError(f"`{shlex.join(argv)}` exited {proc.returncode}: {proc.stderr}")
            if n:
                samples[key].append(proc.seconds)
    return statistics.median(samples["status"]), statistics.median(samples["bare"])


def watch_figures(
    tool: Tillage, edited: list[str], idle_s: float, log: Callable[[str], None]
) -> dict[str, float]:
    """Hook latency for both tillage variants; for the watcher, also how soon a write is
    sealed on its own, and what the daemon costs while nothing changes."""
    figures: dict[str, float] = {}
    targets = edited[:HOOK_EDITS]
    hook_s: list[float] = []
    for n in range(HOOK_RUNS):
        for rel in targets:
            with open(tool.ws / rel, "ab") as f:
                f.write(f"hook edit {n}\n".encode())
        argv = [*tool.command, "--repo", str(tool.ws), "--json", "hook", "turn-end"]
        argv += ["--agent", "bench", "--turn", str(n)]
        hook_s.append(timed_step(tool, partial(tool.exec, argv)).seconds)
    figures["hook_s"] = statistics.median(hook_s)
    if not isinstance(tool, TillageWatched):
        return figures
    tool.restart_watcher()
    pid = tool.daemon_pid()
    if idle_s > 0:
        figures.update(idle_cost(tool, pid, idle_s))
        log(
            f"idle {idle_s:.0f}s: cpu={figures['idle_cpu_pct']:.2f}% "
            f"writes={figures['idle_write_bytes']:.0f}B rss={figures['idle_rss_mib']:.1f}MiB"
        )
    latencies = [write_to_sealed(tool, targets, n) for n in range(LATENCY_RUNS)]
    figures["sealed_latency_s"] = statistics.median(latencies)
    return figures


def idle_cost(tool: TillageWatched, pid: int, seconds: float) -> dict[str, float]:
    """The watcher's CPU, disk writes, memory and snapshots over `seconds` of a quiet folder."""
    before = tool.till("timeline", "-n", "1")["snapshots"][0]["id"]
    time.sleep(2)  # let the restart settle before the window opens
    cpu0, io0, t0 = proc_cpu_seconds(pid), proc_write_bytes(pid), time.perf_counter()
    time.sleep(seconds)
    cpu1, io1, t1 = proc_cpu_seconds(pid), proc_write_bytes(pid), time.perf_counter()
    rss_kib = int(proc_field(f"/proc/{pid}/status", "VmRSS").split()[0])
    after = tool.till("timeline", "-n", "1")["snapshots"][0]["id"]
    return {
        "idle_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "idle_write_bytes": float(io1 - io0),
        "idle_rss_mib": rss_kib / 1024,
        "idle_snapshots": float(before != after),
    }


def write_to_sealed(tool: TillageWatched, targets: list[str], n: int) -> float:
    """Seconds from the last of 10 writes until the watcher has sealed them on its own."""
    head = tool.till("timeline", "-n", "1")["snapshots"][0]["id"]
    for rel in targets:
        with open(tool.ws / rel, "ab") as f:
            f.write(f"latency edit {n}\n".encode())
    written = time.perf_counter()
    deadline = written + 30
    while time.perf_counter() < deadline:
        latest = tool.till("timeline", "-n", "1")["snapshots"][0]
        if latest["id"] != head and latest["trigger"] == "watch":
            return time.perf_counter() - written
        time.sleep(0.02)
    raise BenchError("tillage: the watcher did not seal 10 edits within 30 s")


@dataclass
class Limits:
    """The physical limit of a full restore on this machine: the same tree copied by `cp -a`
    and extracted by `tar`, each timed until durable like every step."""

    cp_s: float
    tar_s: float


def physical_limits(master: Path, scratch: Path, mutate_seed: int) -> Limits:
    """Times `cp -a` and `tar -x` of the tree a full restore puts back (the mutated workload)."""
    tree = scratch / "tree"
    shutil.copytree(master, tree, symlinks=True)
    workload.mutate(tree, seed=mutate_seed)
    archive = scratch / "tree.tar"
    subprocess.run(["tar", "-cf", str(archive), "-C", str(tree), "."], check=True)
    env = dict(os.environ)

    def timed(argv: list[str]) -> float:
        os.sync()
        proc: Proc = run_measured(argv, cwd=scratch, env=env)
        if proc.returncode != 0:
            raise BenchError(f"`{shlex.join(argv)}` exited {proc.returncode}: {proc.stderr}")
        return proc.seconds + durable_sync()

    # Nothing is deleted before the tar is timed, as nothing is before a tool's restore.
    cp_s = timed(["cp", "-a", str(tree), str(scratch / "cp")])
    (scratch / "untar").mkdir()
    tar_s = timed(["tar", "-xf", str(archive), "-C", str(scratch / "untar")])
    return Limits(cp_s, tar_s)


@dataclass
class Summary:
    """Per-tool figures for the table: medians over repeats, RSS as a maximum."""

    cold_seal_s: float
    init_s: float
    store_mib: float
    store_alloc_mib: float
    delta_seal_s: float
    growth_mib: float
    full_rewind_s: float
    full_rewind_user_s: float
    full_rewind_sys_s: float
    path_rewind_s: float
    path_rewind_after_full_s: float
    peak_rss_mib: float
    aux_mib: float
    status_s: float
    bare_python_s: float
    watch: dict[str, float]


def summarize(runs: list[RunResult]) -> Summary:
    """Median of each timed step over the repeats; peak RSS is the max of all."""

    def med(values: Iterator[float]) -> float:
        return statistics.median(list(values))

    return Summary(
        cold_seal_s=med(r.steps["init"].seconds + r.steps["cold_seal"].seconds for r in runs),
        init_s=med(r.steps["init"].seconds for r in runs),
        store_mib=med(r.store_cold[0] / MIB for r in runs),
        store_alloc_mib=med(r.store_cold[1] / MIB for r in runs),
        delta_seal_s=med(r.steps["delta_seal"].seconds for r in runs),
        growth_mib=med((r.store_delta[0] - r.store_cold[0]) / MIB for r in runs),
        full_rewind_s=med(r.steps["full_rewind"].seconds for r in runs),
        full_rewind_user_s=med(r.steps["full_rewind"].user_s for r in runs),
        full_rewind_sys_s=med(r.steps["full_rewind"].sys_s for r in runs),
        path_rewind_s=med(r.steps["path_rewind"].seconds for r in runs),
        path_rewind_after_full_s=med(r.steps["path_rewind_after_full"].seconds for r in runs),
        peak_rss_mib=max(s.max_rss_kib for r in runs for s in r.steps.values()) / 1024,
        aux_mib=med(r.aux_bytes / MIB for r in runs),
        status_s=med(r.status_s for r in runs),
        bare_python_s=med(r.bare_python_s for r in runs),
        watch={
            key: max(r.watch[key] for r in runs if key in r.watch)
            if key.startswith("idle")
            else med(r.watch[key] for r in runs if key in r.watch)
            for key in sorted({k for r in runs for k in r.watch})
        },
    )


# (label, Summary field, format, target ratio to borg or None, the variant the target is for)
# The engine's targets hold for tillage on its own; the calls that must cost what changed
# are targets with the watcher running (issue 7), and the table shows both side by side. A
# full rewind must be quick with or without the watcher (issue 26): both variants, comma-joined.
ROWS: tuple[tuple[str, str, str, float | None, str], ...] = (
    ("cold seal (s)", "cold_seal_s", "{:.2f}", 0.5, "tillage"),
    ("  of which store init (s)", "init_s", "{:.2f}", None, "tillage"),
    ("store size (MiB)", "store_mib", "{:.1f}", 1.0, "tillage"),
    ("  allocated on disk (MiB)", "store_alloc_mib", "{:.1f}", None, "tillage"),
    ("delta seal (s)", "delta_seal_s", "{:.2f}", 0.15, "tillage+watch"),
    ("store growth (MiB)", "growth_mib", "{:.1f}", None, "tillage"),
    ("full rewind (s)", "full_rewind_s", "{:.2f}", 0.5, "tillage,tillage+watch"),
    ("  user CPU (s)", "full_rewind_user_s", "{:.2f}", None, "tillage"),
    ("  sys CPU (s)", "full_rewind_sys_s", "{:.2f}", None, "tillage"),
    ("one-path rewind (s)", "path_rewind_s", "{:.2f}", 0.25, "tillage+watch"),
    ("  right after the full rewind (s)", "path_rewind_after_full_s", "{:.2f}", None, "tillage"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.1f}", 1.0, "tillage"),
    ("caches outside store (MiB)", "aux_mib", "{:.1f}", None, "tillage"),
)


def table_rows(summaries: dict[str, Summary]) -> list[dict[str, Any]]:
    """The result table as data: values per tool, tillage/borg ratio, verdict."""
    rows: list[dict[str, Any]] = []
    for label, attr, fmt, target, target_tool in ROWS:
        values = {t: getattr(s, attr) for t, s in summaries.items()}
        ratios: dict[str, float | None] = {
            v: values[v] / values["borg"] if v in values and values.get("borg") else None
            for v in TILLAGE_VARIANTS
        }
        checked = [ratios[v] for v in target_tool.split(",")]
        ratio = None if None in checked else max(r for r in checked if r is not None)
        verdict = None
        if target is not None:
            verdict = "n/a" if ratio is None else ("PASS" if ratio <= target else "FAIL")
        rows.append(
            {
                "step": label,
                "field": attr,
                "format": fmt,
                "values": values,
                "ratios": ratios,
                "ratio": ratio,
                "target": target,
                "target_tool": target_tool,
                "verdict": verdict,
            }
        )
    return rows


def markdown_table(rows: list[dict[str, Any]], absent: dict[str, str]) -> str:
    """Render table_rows() as Markdown; `absent` marks tools as FAILED or skipped."""
    head = ["step", *TOOLS, *(f"{v}/borg" for v in TILLAGE_VARIANTS), "target", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        values = row["values"]
        fmt = str(row["format"])
        cells = [str(row["step"]).replace("  ", "↳ ")]
        cells += [fmt.format(values[t]) if t in values else absent.get(t, "—") for t in TOOLS]
        for variant in TILLAGE_VARIANTS:
            ratio = row["ratios"][variant]
            cells.append(f"{ratio:.2f}x" if isinstance(ratio, float) else "—")
        target = row["target"]
        cells.append(f"<= {target}x ({row['target_tool']})" if target is not None else "")
        cells.append(str(row["verdict"] or ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool (median reported)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma list of " + ",".join(TOOLS))
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (mutate uses seed+1)")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="shrink the workload for smoke runs (not comparable with targets)",
    )
    parser.add_argument(
        "--workdir", type=Path, help="parent of the scratch dir (default: the system temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument(
        "--no-limits", action="store_true", help="skip the cp -a / tar -x physical-limit rows"
    )
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=60.0,
        help="how long the idle watcher's CPU and writes are watched (first repeat; 0: skip)",
    )
    parser.add_argument(
        "--fail-on-target",
        action="store_true",
        help="exit 3 when a target is missed or cannot be checked",
    )
    args = parser.parse_args(argv)
    unknown = set(args.tools.split(",")) - set(TOOLS)
    if unknown or args.repeat < 1:
        parser.error(f"bad --tools {sorted(unknown)}" if unknown else "--repeat must be >= 1")
    return args


def available_tools(
    names: list[str],
    log: Callable[[str], None],
    classes: Mapping[str, type[Tool]] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The tools that can run here (of `classes`, run.py's own by default), and a note for
    each one that cannot."""
    known = TOOL_CLASSES if classes is None else classes
    ready: list[str] = []
    skipped: dict[str, str] = {}
    for name in names:
        try:
            known[name].check_available()
            ready.append(name)
        except ToolMissingError as exc:
            skipped[name] = str(exc)
            log(f"SKIP {name}: {exc}")
    return ready, skipped


def prefixed(log: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    """A logger that tags each line with the tool and repeat it belongs to."""
    return lambda message: log(f"{prefix} {message}")


def benchmark(
    args: argparse.Namespace, workdir: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    """Generate once, then run every tool per repeat (interleaved, so drift hits all)."""
    names = [t for t in TOOLS if t in args.tools.split(",")]
    ready, skipped = available_tools(names, log)
    if not ready:
        raise SystemExit("nothing to run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    load_before = os.getloadavg()[0]
    versions = {name: TOOL_CLASSES[name].version() for name in ready}
    master = workdir / "workload"
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {master}")
    stats = workload.generate(master, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    runs: dict[str, list[RunResult]] = {name: [] for name in ready}
    failed: dict[str, str] = {}
    limits: list[Limits] = []
    for repeat in range(1, args.repeat + 1):
        for name in ready:
            if name in failed:
                continue
            run_dir = workdir / f"{name}-{repeat}"
            tool = TOOL_CLASSES[name](run_dir, run_dir / "ws")
            run_dir.mkdir(parents=True)
            try:
                runs[name].append(
                    run_once(
                        tool,
                        master,
                        args.seed + 1,
                        prefixed(log, f"[{name} #{repeat}]"),
                        args.idle_seconds if repeat == 1 else 0.0,
                    )
                )
            except (BenchError, ToolMissingError) as exc:
                failed[name] = str(exc)
                log(f"FAIL {name} (repeat {repeat}):\n{exc}")
            # The run's folder stays until the whole run is over (see KEEP_UNTIL_THE_END).
        if not args.no_limits:
            limit_dir = workdir / f"limits-{repeat}"
            limit_dir.mkdir()
            limits.append(physical_limits(master, limit_dir, args.seed + 1))
            log(f"[limits #{repeat}] cp -a={limits[-1].cp_s:.2f}s tar -x={limits[-1].tar_s:.2f}s")
    summaries = {name: summarize(r) for name, r in runs.items() if name not in failed and r}
    return {
        "command": "python bench/run.py " + shlex.join(sys.argv[1:]),
        "machine": machine_facts(workdir, load_before),
        "versions": versions,
        "workload": {**asdict(stats), "seed": args.seed, "scale": args.scale},
        "repeat": args.repeat,
        "skipped": skipped,
        "failed": failed,
        "summary": {name: asdict(s) for name, s in summaries.items()},
        "table": table_rows(summaries),
        "limits": limit_rows(limits, summaries),
        "runs": {name: [asdict(r) for r in rs] for name, rs in runs.items()},
    }


def limit_rows(limits: list[Limits], summaries: dict[str, Summary]) -> dict[str, Any]:
    """Medians of the physical limits, and the full restores and `till status` beside them."""
    out: dict[str, Any] = {"runs": [asdict(x) for x in limits]}
    if limits:
        out["cp_s"] = statistics.median(x.cp_s for x in limits)
        out["tar_s"] = statistics.median(x.tar_s for x in limits)
    out["full_rewind_s"] = {name: s.full_rewind_s for name, s in summaries.items()}
    out["status"] = {
        name: {
            "status_s": s.status_s,
            "bare_python_s": s.bare_python_s,
            "ratio": s.status_s / s.bare_python_s,
        }
        for name, s in summaries.items()
        if name in TILLAGE_VARIANTS and s.bare_python_s
    }
    watched = out["status"].get("tillage+watch")
    if watched is not None:
        out["status_ratio"] = watched["ratio"]  # the target is with the watcher running
    out["watch"] = {
        name: s.watch for name, s in summaries.items() if name in TILLAGE_VARIANTS and s.watch
    }
    return out


def watch_failures(limits: dict[str, Any]) -> list[str]:
    """The watcher and hook targets this run missed."""
    missed: list[str] = []
    for name, figures in limits.get("watch", {}).items():
        if figures.get("hook_s", 0.0) > HOOK_TARGET_S:
            missed.append(f"{name}: turn-end hook {figures['hook_s']:.3f}s > {HOOK_TARGET_S}s")
        if figures.get("idle_cpu_pct", 0.0) > IDLE_CPU_TARGET:
            missed.append(f"{name}: idle CPU {figures['idle_cpu_pct']:.2f}% > 1%")
        if figures.get("idle_write_bytes", 0.0) > 0 or figures.get("idle_snapshots", 0.0) > 0:
            missed.append(f"{name}: the idle watcher wrote or sealed")
    return missed


def limits_report(limits: dict[str, Any]) -> list[str]:
    """The physical-limit table and the start-up row, as Markdown lines."""
    out: list[str] = []
    if "cp_s" in limits:
        restores = limits["full_rewind_s"]
        out += [
            "",
            "Full restore beside the physical limit (same tree, timed until durable):",
            "",
            "| restore of the delta tree | s | " + " | ".join(f"{t} / it" for t in restores) + " |",
            "|---|---|" + "---|" * len(restores),
        ]
        for label, key in (("`cp -a` of the tree", "cp_s"), ("`tar -x` of the tree", "tar_s")):
            base = limits[key]
            ratios = " | ".join(f"{v / base:.2f}x" for v in restores.values())
            out.append(f"| {label} | {base:.2f} | {ratios} |")
    for name, row in limits.get("status", {}).items():
        ratio = row["ratio"]
        verdict = "PASS" if ratio <= STATUS_TARGET else "FAIL"
        target = f", target <= {STATUS_TARGET:.0f}x: {verdict}" if name == "tillage+watch" else ""
        out += [
            "",
            f"{name}: `till status` {row['status_s'] * 1000:.0f} ms against `python -c pass` "
            f"{row['bare_python_s'] * 1000:.0f} ms (medians of {STATUS_RUNS} paired runs per "
            f"repeat): {ratio:.2f}x{target}",
        ]
    out += watch_report(limits.get("watch", {}))
    return out


WATCH_ROWS = (
    ("`till hook turn-end` after 10 edits (s, until durable)", "hook_s", "{:.3f}", "<= 0.3 s"),
    ("write to sealed by the watcher (s, debounce 500 ms)", "sealed_latency_s", "{:.2f}", ""),
    ("idle watcher CPU (% of a core)", "idle_cpu_pct", "{:.2f}", "< 1%"),
    ("idle watcher disk writes (bytes)", "idle_write_bytes", "{:.0f}", "0"),
    ("idle watcher snapshots", "idle_snapshots", "{:.0f}", "0"),
    ("idle watcher RSS (MiB)", "idle_rss_mib", "{:.1f}", ""),
)


def watch_report(figures: dict[str, dict[str, float]]) -> list[str]:
    """Hooks and the watcher, for tillage alone and with its watcher running."""
    if not figures:
        return []
    names = [n for n in TILLAGE_VARIANTS if n in figures]
    out = [
        "",
        "Hooks and the watcher (medians; idle figures over one window in the first repeat):",
        "",
        "| figure | " + " | ".join(names) + " | target |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    for label, key, fmt, target in WATCH_ROWS:
        cells = [fmt.format(figures[n][key]) if key in figures[n] else "—" for n in names]
        out.append(f"| {label} | " + " | ".join(cells) + f" | {target} |")
    return out


def report(results: dict[str, Any]) -> str:
    """The human report: facts, versions, notes and the Markdown table."""
    machine, stats = results["machine"], results["workload"]
    out = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']}, "
        f"{machine['python']}, {machine['platform']}, workdir on {machine['workdir_fs']}",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in results["versions"].items()),
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB "
        f"(seed {stats['seed']}, scale {stats['scale']}), median of {results['repeat']} runs",
    ]
    if stats["scale"] != 1.0:
        out.append("NOTE: scale != 1.0 — a smoke run, not comparable with the targets.")
    if machine["load_before"] > BUSY_LOAD:
        out.append(
            f"WARNING: load average was {machine['load_before']:.2f} when the run started: "
            "something else was using the CPU, so timings are noisy. Rerun on a quiet machine."
        )
    for name, why in results["skipped"].items():
        out.append(f"SKIPPED {name}: {why}")
    for name, why in results["failed"].items():
        out.append(f"FAILED {name}: {why.splitlines()[0]}")
    absent = {name: "skipped" for name in results["skipped"]}
    absent.update({name: "FAILED" for name in results["failed"]})
    out += ["", markdown_table(results["table"], absent)]
    out += limits_report(results.get("limits", {}))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 if a tool failed, 3 (with --fail-on-target) on a missed target."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tillage-bench-", dir=args.workdir)).resolve()
    log(f"scratch dir: {workdir}")
    try:
        results = benchmark(args, workdir, log)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    rows = results["table"]
    print(report(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if results["failed"]:
        return 1
    status_ratio = results["limits"].get("status_ratio")
    if args.fail_on_target and (
        any(r["verdict"] != "PASS" for r in rows if r["target"])
        or (status_ratio is not None and status_ratio > STATUS_TARGET)
        or watch_failures(results["limits"])
    ):
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
