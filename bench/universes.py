"""Benchmark universes: fork, five at once, radar and merge, against `cp -a` in the same run.

On the standard workload (bench/workload.py, the seed bench/run.py uses), each repeat measures,
alternating which side of a pair goes first (so drift hits both), every step timed as whole
processes until durable (wall time plus the `sync` after it, as bench/run.py does):

1. ext4 (the scratch dir's file system): a whole `till fork` (its base seal included, on an
   attached workspace whose last seal is current) against `cp -a` of the same folder; the fork's
   copy alone (`tillage.platform.clone.copy_tree`, timed inside its own process) against
   `cp -a`; the disk each adds (allocated bytes: the copy, plus the store's growth for the fork).
2. XFS on a loop file (root and mkfs.xfs needed: 4 GiB sparse file, `mkfs.xfs -q`, mounted
   under the scratch dir, unmounted at the end whatever happens): `till fork` against
   `cp -a --reflink=always`, and the extra disk of each as the file system's used-bytes delta.
3. Five universes at once: `till exec -n 5 -- true` against 5 `cp -a` one after another and 5
   at once.
4. Radar: 5 forks each edit the same 100 files and seal; `till radar`.
5. Merge: a fork edits 100 files; `till merge NAME --dry-run`, then `till merge NAME`.

Ratios are of medians over --repeat runs. The Markdown table (stdout) says PASS or MISS per
target, and says so in a row when a part could not run (no silent skip). See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

# Sibling modules: `python bench/universes.py` puts bench/ first on sys.path.
import workload
from measure import (
    BenchError,
    Proc,
    durable_sync,
    machine_facts,
    run_measured,
    tail,
    tree_bytes,
)
from runners import Tillage

MIB = 1024 * 1024
XFS_SIZE = "4G"
UNIVERSES = 5
RADAR_FORKS = 5
EDITED_FILES = 100
RADAR_RUNS = 3  # `till radar` runs per repeat (median)
BISECT_SNAPSHOTS = 10
BISECT_BREAKS_AT = 6

# Targets (issue 8, tightened by issue 21): ratio to the baseline, or seconds.
FORK_TARGET = 1.2  # whole fork / cp -a on ext4 (issue 21; 1.5 in issue 8)
COPY_TARGET = 1.0  # fork's copy alone / cp -a on ext4
XFS_FORK_TARGET = 1.5  # fork / cp -a --reflink=always on XFS
XFS_DISK_TARGET = 0.05  # extra disk per fork / workspace bytes on XFS
RADAR_TARGET_S = 1.0
MERGE_TARGET_S = 1.0  # a merge of a 100-file change (issue 21)


Log = Callable[[str], None]


def used_bytes(path: Path) -> int:
    """Bytes in use on the file system holding `path` (statvfs): exact on a private loop file
    system, where nothing else writes."""
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def allocated(paths: list[Path]) -> int:
    """Allocated (du-style) bytes under `paths`."""
    return tree_bytes(paths)[1]


@dataclass
class Timed:
    """One timed step: its processes' wall seconds plus the sync after them."""

    seconds: float
    procs: list[Proc] = field(default_factory=list)


class Till:
    """Runs `till` (Tillage.command) against one store, as whole processes."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["TILLAGE_HOME"] = str(self.home)
        return env

    def run(self, repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[Proc, Any]:
        """`till --repo REPO --json ARGS`: the process and its one JSON document."""
        argv = [*Tillage.command, "--repo", str(repo), "--json", *args]
        proc = run_measured(argv, cwd=repo, env=self.env())
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = None
        if proc.returncode not in ok or not isinstance(doc, dict) or "error" in doc:
            error = doc.get("error") if isinstance(doc, dict) else None
            said = f"{error.get('name')}: {error.get('message')}" if isinstance(error, dict) else ""
            raise BenchError(
                f"`till {' '.join(args)}` exited {proc.returncode} {said}\n"
                f"command: {shlex.join(proc.argv)}\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return proc, doc

    def timed(self, repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[Timed, Any]:
        """run(), after a sync (no step pays for the previous one's write-back), timed until
        durable."""
        os.sync()
        proc, doc = self.run(repo, *args, ok=ok)
        return Timed(proc.seconds + durable_sync(), [proc]), doc


def timed_commands(argvs: list[list[str]], cwd: Path, *, parallel: bool = False) -> Timed:
    """Runs commands one after another (or all at once), timed until durable."""
    os.sync()
    env = dict(os.environ)
    if not parallel:
        procs = [run_measured(argv, cwd=cwd, env=env) for argv in argvs]
        wall = sum(p.seconds for p in procs)
    else:
        started = time.perf_counter()
        children = [
            subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL) for argv in argvs
        ]
        codes = [child.wait() for child in children]
        wall = time.perf_counter() - started
        procs = [
            Proc(argv, code, wall, 0.0, 0.0, 0, "", "")
            for argv, code in zip(argvs, codes, strict=True)
        ]
    for proc in procs:
        if proc.returncode != 0:
            raise BenchError(f"`{shlex.join(proc.argv)}` exited {proc.returncode}: {proc.stderr}")
    return Timed(wall + durable_sync(), procs)


def python_of_till() -> str:
    """The interpreter that runs `till` (to time copy_tree in the same installation)."""
    if Tillage.command[1:3] == ["-m", "tillage"]:
        return Tillage.command[0]
    return sys.executable


COPY_SCRIPT = """
import sys, time
from pathlib import Path
from tillage.platform.clone import copy_tree
started = time.perf_counter()
stats = copy_tree(Path(sys.argv[1]), Path(sys.argv[2]), skip=lambda rel: rel == ".tillage")
print(time.perf_counter() - started, stats.driver, stats.files, stats.bytes)
"""


def timed_copy_tree(src: Path, dst: Path) -> tuple[float, str]:
    """The fork's copy alone: copy_tree timed inside its own process (no start-up), plus the
    sync after it; and the driver it used."""
    os.sync()
    proc = run_measured(
        [python_of_till(), "-c", COPY_SCRIPT, str(src), str(dst)],
        cwd=src.parent,
        env=dict(os.environ),
    )
    if proc.returncode != 0:
        raise BenchError(f"copy_tree failed: {tail(proc.stderr)}")
    seconds, driver, _files, _bytes = proc.stdout.split()
    return float(seconds) + durable_sync(), driver


def attach(till: Till, master: Path, ws: Path) -> None:
    """A fresh copy of the workload, attached and sealed (untimed): its last seal is current."""
    shutil.copytree(master, ws, symlinks=True)
    till.run(ws, "watch", "--no-daemon")


def fork_once(till: Till, ws: Path, name: str) -> tuple[Timed, dict[str, Any]]:
    """`till fork NAME`, timed until durable; its `fork` object."""
    step, doc = till.timed(ws, "fork", name)
    fork = doc.get("fork")
    if not isinstance(fork, dict) or not fork.get("path"):
        raise BenchError(f"till fork answered {doc!r}")
    return step, fork


def fork_rm(till: Till, ws: Path, name: str) -> None:
    """Removes a fork (untimed)."""
    till.run(ws, "fork-rm", name, "--yes")


def edit_files(root: Path, paths: list[str], tag: str) -> None:
    """Changes each file in the middle, as an agent's edit would (a line replaced)."""
    for rel in paths:
        path = root / rel
        lines = path.read_text().split("\n")
        middle = len(lines) // 2
        lines[middle] = f"# {tag}: {rel}"
        path.write_text("\n".join(lines))


# -- the parts --------------------------------------------------------------------------------


def ext4_part(till: Till, run_dir: Path, repeat: int, log: Log) -> dict[str, Any]:
    """Whole fork, the copy alone, and cp -a, on the scratch dir's file system."""
    ws = run_dir / "ws"
    figures: dict[str, Any] = {}

    def fork() -> None:
        before = allocated([till.home])
        step, info = fork_once(till, ws, f"f{repeat}")
        figures["fork_s"] = step.seconds
        figures["driver"] = info.get("driver")
        figures["fork_disk"] = allocated([Path(info["path"])]) + allocated([till.home]) - before
        fork_rm(till, ws, f"f{repeat}")

    def cp() -> None:
        dest = run_dir / "cp"
        step = timed_commands([["cp", "-a", str(ws), str(dest)]], run_dir)
        figures["cp_s"] = step.seconds
        figures["cp_disk"] = allocated([dest])
        shutil.rmtree(dest)

    def copy() -> None:
        dest = run_dir / "copy"
        figures["copy_s"], figures["copy_driver"] = timed_copy_tree(ws, dest)
        shutil.rmtree(dest)

    steps = [fork, cp, copy]
    for step in steps if repeat % 2 else reversed(steps):
        step()
    log(
        f"ext4: fork {figures['fork_s']:.2f}s ({figures['driver']}) cp -a {figures['cp_s']:.2f}s "
        f"copy_tree {figures['copy_s']:.2f}s"
    )
    return figures


def universes_part(till: Till, run_dir: Path, repeat: int, log: Log) -> dict[str, Any]:
    """`till exec -n 5 -- true` against 5 cp -a in a row and 5 at once (same workspace)."""
    ws = run_dir / "ws"
    figures: dict[str, Any] = {}

    def exec_() -> None:
        step, doc = till.timed(ws, "exec", "-n", str(UNIVERSES), "--", "true")
        figures["exec_s"] = step.seconds
        names = [u["fork"] for u in doc.get("universes", [])]
        if len(names) != UNIVERSES:
            raise BenchError(f"till exec made {len(names)} universes: {doc!r}")
        for name in names:
            fork_rm(till, ws, name)

    def copies(parallel: bool) -> None:
        dests = [run_dir / f"cp{n}" for n in range(UNIVERSES)]
        argvs = [["cp", "-a", str(ws), str(d)] for d in dests]
        step = timed_commands(argvs, run_dir, parallel=parallel)
        figures["cp_parallel_s" if parallel else "cp_serial_s"] = step.seconds
        for dest in dests:
            shutil.rmtree(dest)

    steps: list[Callable[[], None]] = [exec_, partial(copies, False), partial(copies, True)]
    for step in steps if repeat % 2 else reversed(steps):
        step()
    log(
        f"exec -n {UNIVERSES}: {figures['exec_s']:.2f}s; {UNIVERSES}x cp -a "
        f"{figures['cp_serial_s']:.2f}s in a row, {figures['cp_parallel_s']:.2f}s at once"
    )
    return figures


def radar_part(till: Till, run_dir: Path, log: Log) -> dict[str, Any]:
    """5 forks each edit the same 100 files and seal; `till radar` timed."""
    ws = run_dir / "ws"
    paths = workload.source_files(ws)[:EDITED_FILES]
    names = [f"radar{n}" for n in range(RADAR_FORKS)]
    for name in names:
        _step, info = fork_once(till, ws, name)
        root = Path(info["path"])
        edit_files(root, paths, f"edited in {name}")
        till.run(root, "snap", "-m", "radar edits")
    times: list[float] = []
    conflicts = 0
    for _ in range(RADAR_RUNS):
        step, doc = till.timed(ws, "radar")
        times.append(step.seconds)
        conflicts = len(doc.get("conflicts", []))
    for name in names:
        fork_rm(till, ws, name)
    figures = {"radar_s": statistics.median(times), "radar_conflicts": conflicts}
    log(f"radar: {figures['radar_s']:.3f}s, {conflicts} conflicting paths")
    return figures


def merge_part(till: Till, run_dir: Path, repeat: int, log: Log) -> dict[str, Any]:
    """A fork edits 100 files; `till merge NAME --dry-run`, then `till merge NAME`."""
    ws = run_dir / "ws"
    name = f"merge{repeat}"
    _step, info = fork_once(till, ws, name)
    paths = workload.source_files(Path(info["path"]))[-EDITED_FILES:]
    edit_files(Path(info["path"]), paths, f"merged from {name}")
    dry, dry_doc = till.timed(ws, "merge", name, "--dry-run")
    step, doc = till.timed(ws, "merge", name)
    if not doc.get("landed"):
        raise BenchError(f"till merge landed nothing: {json.dumps(doc)[:500]}")
    figures = {
        "merge_dry_s": dry.seconds,
        "merge_s": step.seconds,
        "merge_changes": doc.get("changes"),
        "merge_dry_changes": dry_doc.get("changes"),
    }
    log(f"merge of {EDITED_FILES} files: {step.seconds:.2f}s (dry run {dry.seconds:.2f}s)")
    return figures


def bisect_part(till: Till, run_dir: Path, log: Log) -> dict[str, Any]:
    """Not an issue target: `till bisect` over 10 snapshots of the workload (a state file
    breaks at the 7th), so the cost of a bisect is on record. These snapshots differ in the
    state file only, so every probe after the first (its folder made the next snapshot in
    place) writes next to nothing: bench/bisect_probes.py measures probes between snapshots
    that differ as the standard mutation does."""
    ws = run_dir / "ws"
    state = ws / "bisect-state.txt"
    ids = []
    for n in range(BISECT_SNAPSHOTS):
        state.write_text("ok\n" if n < BISECT_BREAKS_AT else "fail\n")
        _proc, doc = till.run(ws, "snap", "-m", f"bisect state {n}")
        ids.append(doc["snapshot"]["id"])
    step, doc = till.timed(ws, "bisect", "--good", ids[0], "--", "grep -qx ok bisect-state.txt")
    if doc.get("first_bad", {}).get("id") != ids[BISECT_BREAKS_AT]:
        raise BenchError(f"till bisect found the wrong snapshot: {json.dumps(doc)[:500]}")
    probes = int(doc["probe_count"])
    figures = {"bisect_s": step.seconds, "bisect_probes": probes, "probe_s": step.seconds / probes}
    log(f"bisect: {step.seconds:.2f}s, {probes} probes")
    return figures


class XfsMount:
    """A 4 GiB XFS file system on a loop file under `where`, unmounted on exit (and on
    SIGTERM, through the handler main() installs)."""

    def __init__(self, where: Path) -> None:
        self.image = where / "xfs.img"
        self.mount = where / "xfs"
        self.mounted = False

    @staticmethod
    def why_not() -> str | None:
        """Why an XFS loop file system cannot be made here (None: it can)."""
        if os.geteuid() != 0:
            return "not root (mounting a loop file system needs root)"
        if shutil.which("mkfs.xfs") is None:
            return "mkfs.xfs not found (apt-get install xfsprogs)"
        return None

    def __enter__(self) -> XfsMount:
        subprocess.run(["truncate", "-s", XFS_SIZE, str(self.image)], check=True)
        subprocess.run(["mkfs.xfs", "-q", str(self.image)], check=True)
        self.mount.mkdir()
        subprocess.run(
            ["mount", "-o", "loop", str(self.image), str(self.mount)],
            check=True,
            capture_output=True,
        )
        self.mounted = True
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.mounted:
            done = subprocess.run(["umount", str(self.mount)], capture_output=True, check=False)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)
            self.mounted = False
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()


def xfs_part(master: Path, mount: Path, repeat: int, log: Log) -> dict[str, Any]:
    """`till fork` against `cp -a --reflink=always` on XFS, with the used-bytes delta of each."""
    run_dir = mount / f"run-{repeat}"
    run_dir.mkdir()
    till = Till(run_dir / "home")
    ws = run_dir / "ws"
    attach(till, master, ws)
    figures: dict[str, Any] = {"workspace_bytes": tree_bytes([ws])[0]}

    def fork() -> None:
        os.sync()
        before = used_bytes(mount)
        step, info = fork_once(till, ws, f"x{repeat}")
        figures["fork_s"] = step.seconds
        figures["driver"] = info.get("driver")
        figures["fork_disk"] = used_bytes(mount) - before

    def cp() -> None:
        dest = run_dir / "reflink"
        os.sync()
        before = used_bytes(mount)
        step = timed_commands([["cp", "-a", "--reflink=always", str(ws), str(dest)]], run_dir)
        figures["cp_s"] = step.seconds
        figures["cp_disk"] = used_bytes(mount) - before

    def fork_watched() -> None:
        # As an agent's workspace runs: `till watch` keeps a watcher, so the base seal lists
        # only what changed (nothing here) instead of walking every folder.
        till.run(ws, "watch")
        try:
            os.sync()
            step, _info = fork_once(till, ws, f"w{repeat}")
            figures["fork_watch_s"] = step.seconds
        finally:
            till.run(ws, "watch", "--stop")

    for step in (fork, fork_watched, cp) if repeat % 2 else (cp, fork_watched, fork):
        step()
    log(
        f"xfs: fork {figures['fork_s']:.2f}s, watched {figures['fork_watch_s']:.2f}s "
        f"({figures['driver']}, "
        f"+{figures['fork_disk'] / MIB:.1f} MiB) reflink cp {figures['cp_s']:.2f}s "
        f"(+{figures['cp_disk'] / MIB:.1f} MiB)"
    )
    shutil.rmtree(run_dir)
    return figures


# -- the run and the table --------------------------------------------------------------------

PARTS = ("ext4", "xfs", "exec", "radar", "merge", "bisect")
DEFAULT_PARTS = ("ext4", "xfs", "exec", "radar", "merge")  # the issue's; bisect on request


def run_part(
    name: str,
    results: dict[str, list[dict[str, Any]]],
    failed: dict[str, str],
    log: Log,
    action: Callable[[], dict[str, Any]],
) -> None:
    """Runs one part of one repeat; a failure is kept (and reported in the table), the other
    parts still run."""
    if name in failed:
        return
    try:
        results.setdefault(name, []).append(action())
    except (BenchError, subprocess.CalledProcessError, OSError) as exc:
        failed[name] = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        log(f"FAIL {name}: {exc}")


def benchmark(args: argparse.Namespace, workdir: Path, log: Log) -> dict[str, Any]:
    """Generates the workload once, then runs every part per repeat."""
    load_before = os.getloadavg()[0]  # before the workload is generated: others' load only
    parts = [p for p in PARTS if p in args.parts.split(",")]
    master = workdir / "workload"
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {master}")
    stats = workload.generate(master, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    results: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    xfs: XfsMount | None = None
    if "xfs" in parts:
        why = XfsMount.why_not()
        if why is not None:
            unavailable["xfs"] = why
        else:
            xfs = XfsMount(workdir)
            try:
                xfs.__enter__()
            except (subprocess.CalledProcessError, OSError) as exc:
                stderr = getattr(exc, "stderr", b"") or b""
                unavailable["xfs"] = f"could not make the loop file system: {exc} {stderr!r}"
                xfs.close()
                xfs = None
    try:
        for repeat in range(1, args.repeat + 1):
            run_dir = workdir / f"run-{repeat}"
            run_dir.mkdir()
            till = Till(run_dir / "home")
            try:
                if set(parts) - {"xfs"}:
                    # One attached workspace per repeat, sealed (untimed): its last seal is
                    # current when the fork is timed; exec, radar and merge reuse it.
                    attach(till, master, run_dir / "ws")
                if "ext4" in parts:
                    run_part(
                        "ext4", results, failed, log, partial(ext4_part, till, run_dir, repeat, log)
                    )
                if xfs is not None:
                    mount = xfs.mount
                    run_part(
                        "xfs", results, failed, log, partial(xfs_part, master, mount, repeat, log)
                    )
                if "exec" in parts:
                    run_part(
                        "exec",
                        results,
                        failed,
                        log,
                        partial(universes_part, till, run_dir, repeat, log),
                    )
                if "radar" in parts:
                    run_part("radar", results, failed, log, partial(radar_part, till, run_dir, log))
                if "merge" in parts:
                    run_part(
                        "merge",
                        results,
                        failed,
                        log,
                        partial(merge_part, till, run_dir, repeat, log),
                    )
                if "bisect" in parts:
                    run_part(
                        "bisect", results, failed, log, partial(bisect_part, till, run_dir, log)
                    )
            finally:
                if not args.keep:
                    shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if xfs is not None:
            xfs.close()
    return {
        "command": "python bench/universes.py " + shlex.join(sys.argv[1:]),
        "machine": machine_facts(workdir, load_before),
        "workload": {
            "files": stats.files,
            "bytes": stats.bytes,
            "seed": args.seed,
            "scale": args.scale,
        },
        "repeat": args.repeat,
        "parts": parts,
        "failed": failed,
        "unavailable": unavailable,
        "runs": results,
        "rows": table_rows(results, failed, unavailable, parts),
    }


def med(runs: list[dict[str, Any]], key: str) -> float | None:
    """Median of one figure over the repeats (None when no run has it)."""
    values = [float(r[key]) for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _verdict(value: float | None, target: float | None) -> str:
    if target is None:
        return ""
    if value is None:
        return "n/a"
    return "PASS" if value <= target else "MISS"


def table_rows(
    results: dict[str, list[dict[str, Any]]],
    failed: dict[str, str],
    unavailable: dict[str, str],
    parts: list[str],
) -> list[dict[str, Any]]:
    """The table as data: one row per figure, with the baseline, ratio, target and verdict."""
    rows: list[dict[str, Any]] = []

    def row(
        label: str,
        value: float | None,
        unit: str,
        baseline_label: str = "",
        baseline: float | None = None,
        target: float | None = None,
        ratio: float | None = None,
        note: str = "",
    ) -> None:
        if ratio is None and baseline is not None:
            ratio = _ratio(value, baseline)
        checked = ratio if baseline is not None or ratio is not None else value
        rows.append(
            {
                "measure": label,
                "value": value,
                "unit": unit,
                "baseline": baseline_label,
                "baseline_value": baseline,
                "ratio": ratio,
                "target": target,
                "verdict": _verdict(checked, target),
                "note": note,
            }
        )

    def absent(part: str, label: str) -> bool:
        if part not in parts:
            return True
        why = unavailable.get(part) or (f"failed: {failed[part]}" if part in failed else None)
        if why is None and not results.get(part):
            why = "no run"
        if why is not None:
            rows.append(
                {
                    "measure": label,
                    "value": None,
                    "unit": "",
                    "baseline": "",
                    "baseline_value": None,
                    "ratio": None,
                    "target": None,
                    "verdict": "NOT RUN",
                    "note": why,
                }
            )
            return True
        return False

    if not absent("ext4", "fork on ext4"):
        runs = results["ext4"]
        drivers = sorted({str(r.get("driver")) for r in runs})
        row(
            "whole `till fork` (s)",
            med(runs, "fork_s"),
            "s",
            "`cp -a`",
            med(runs, "cp_s"),
            FORK_TARGET,
            note="driver " + ", ".join(drivers),
        )
        row(
            "fork's copy alone, copy_tree (s)",
            med(runs, "copy_s"),
            "s",
            "`cp -a`",
            med(runs, "cp_s"),
            COPY_TARGET,
        )
        row(
            "extra disk per fork (MiB)",
            _mib(med(runs, "fork_disk")),
            "MiB",
            "`cp -a`",
            _mib(med(runs, "cp_disk")),
            note="allocated bytes: the copy plus the store's growth",
        )
    if not absent("xfs", "fork on XFS (loop)"):
        runs = results["xfs"]
        drivers = sorted({str(r.get("driver")) for r in runs})
        row(
            "XFS: `till fork` (s)",
            med(runs, "fork_s"),
            "s",
            "`cp -a --reflink=always`",
            med(runs, "cp_s"),
            XFS_FORK_TARGET,
            note="driver " + ", ".join(drivers),
        )
        row(
            "XFS: `till fork`, watcher running (s)",
            med(runs, "fork_watch_s"),
            "s",
            "`cp -a --reflink=always`",
            med(runs, "cp_s"),
            XFS_FORK_TARGET,
            note="base seal lists only what changed",
        )
        ws_bytes = med(runs, "workspace_bytes")
        fork_disk = med(runs, "fork_disk")
        row(
            "XFS: extra disk per fork (MiB)",
            _mib(fork_disk),
            "MiB",
            "`cp -a --reflink=always`",
            _mib(med(runs, "cp_disk")),
            note="statvfs used delta",
        )
        row(
            "XFS: extra disk per fork / workspace",
            fork_disk / ws_bytes if fork_disk is not None and ws_bytes else None,
            "",
            target=XFS_DISK_TARGET,
            ratio=fork_disk / ws_bytes if fork_disk is not None and ws_bytes else None,
            note=f"workspace {_mib(ws_bytes) or 0:.1f} MiB",
        )
    if not absent("exec", "five universes"):
        runs = results["exec"]
        exec_s = med(runs, "exec_s")
        row(
            f"`till exec -n {UNIVERSES} -- true` (s)",
            exec_s,
            "s",
            f"{UNIVERSES}x `cp -a` in a row",
            med(runs, "cp_serial_s"),
        )
        row(
            f"`till exec -n {UNIVERSES} -- true` (s)",
            exec_s,
            "s",
            f"{UNIVERSES}x `cp -a` at once",
            med(runs, "cp_parallel_s"),
        )
        row(
            "  per universe (s)",
            _divide(exec_s, UNIVERSES),
            "s",
            "one `cp -a`",
            _divide(med(runs, "cp_serial_s"), UNIVERSES),
        )
    if not absent("radar", "radar"):
        runs = results["radar"]
        row(
            f"`till radar`, {RADAR_FORKS} forks x {EDITED_FILES} paths (s)",
            med(runs, "radar_s"),
            "s",
            target=RADAR_TARGET_S,
            note=f"{int(med(runs, 'radar_conflicts') or 0)} conflicting paths",
        )
    if not absent("merge", "merge"):
        runs = results["merge"]
        row(f"`till merge NAME --dry-run`, {EDITED_FILES} files (s)", med(runs, "merge_dry_s"), "s")
        row(
            f"`till merge NAME`, {EDITED_FILES} files (s)",
            med(runs, "merge_s"),
            "s",
            target=MERGE_TARGET_S,
            note=f"{int(med(runs, 'merge_changes') or 0)} changes landed",
        )
    if not absent("bisect", "bisect"):
        runs = results["bisect"]
        probes = int(med(runs, "bisect_probes") or 0)
        row(
            f"`till bisect`, {BISECT_SNAPSHOTS} snapshots (s)",
            med(runs, "bisect_s"),
            "s",
            note=f"{probes} probes, {med(runs, 'probe_s') or 0:.2f} s a probe (write the "
            "snapshot into a fresh folder, check, remove)",
        )
    return rows


def _divide(value: float | None, by: float) -> float | None:
    return value / by if value is not None else None


def _mib(value: float | None) -> float | None:
    return value / MIB if value is not None else None


def markdown(rows: list[dict[str, Any]]) -> str:
    """Renders table_rows() as Markdown."""
    out = [
        "| measure | tillage | baseline | baseline value | ratio | target | result | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        value = "—" if r["value"] is None else _num(r["value"], r["unit"])
        base = "—" if r["baseline_value"] is None else _num(r["baseline_value"], r["unit"])
        ratio = (
            ""
            if r["ratio"] is None
            else f"{r['ratio']:.2f}x"
            if r["unit"] != ""
            else f"{r['ratio'] * 100:.2f}%"
        )
        target = ""
        if r["target"] is not None:
            target = (
                f"< {r['target'] * 100:.0f}%"
                if r["unit"] == ""
                else (f"<= {r['target']}x" if r["baseline"] else f"< {r['target']} s")
            )
        out.append(
            f"| {r['measure'].replace('  ', '↳ ')} | {value} | {r['baseline']} | {base} "
            f"| {ratio} | {target} | {r['verdict']} | {r['note']} |"
        )
    return "\n".join(out)


def _num(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f}" if value < 1 else f"{value:.2f}"
    if unit == "MiB":
        return f"{value:.1f}"
    return f"{value * 100:.2f}%"


def report(results: dict[str, Any]) -> str:
    machine, stats = results["machine"], results["workload"]
    out = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs, {machine['python']}, {machine['platform']}, "
        f"scratch dir on {machine['workdir_fs']}, load {machine['load_before']:.2f} at start",
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB "
        f"(seed {stats['seed']}, scale {stats['scale']}), median of {results['repeat']} runs",
    ]
    if stats["scale"] != 1.0:
        out.append("NOTE: scale != 1.0 — a smoke run, not comparable with the targets.")
    out += ["", markdown(results["rows"])]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median reported)")
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workload (smoke runs)")
    parser.add_argument(
        "--workdir", type=Path, help="parent of the scratch dir (default: temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    parser.add_argument(
        "--parts", default=",".join(DEFAULT_PARTS), help="comma list of " + ",".join(PARTS)
    )
    parser.add_argument("--fail-on-target", action="store_true", help="exit 3 on a MISS or NOT RUN")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown or args.repeat < 1:
        parser.error(f"bad --parts {sorted(unknown)}" if unknown else "--repeat must be >= 1")
    return args


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark: 1 when a part failed, 3 (with --fail-on-target) on a missed target."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)
    Tillage.check_available()  # also compiles tillage's bytecode, as an install would

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    # SIGTERM unwinds like Ctrl-C, so the loop file system is unmounted and the scratch removed.
    signal.signal(signal.SIGTERM, _interrupted)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tillage-universes-", dir=args.workdir)).resolve()
    log(f"scratch dir: {workdir}")
    try:
        results = benchmark(args, workdir, log)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(report(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if results["failed"]:
        return 1
    if args.fail_on_target and any(
        r["verdict"] in ("MISS", "NOT RUN", "n/a") for r in results["rows"]
    ):
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
