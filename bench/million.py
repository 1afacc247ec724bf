"""Issue 26's million-file benchmark: tillage, tillage with its watcher, borg and restic on one
node_modules-like tree of N files, in one run, side by side.

bench/run.py copies its workload once per tool and repeat, which a million files cannot afford
(a `cp -a` of the tree takes minutes and 4+ GiB). Here every tool works IN PLACE on the one
built tree (bench/million_tree.py): borg and restic only read it; tillage adds `.tillage/`,
which is removed after it; and every file a delta step changes is first saved (bytes, atime and
mtime) and put back byte-exact before the next tool, so each tool starts from the pristine
tree. The stamp in the tree is marked in use before the first tool and clean after the last
restore, so a kept tree (`--tree DIR`) that a crash left changed is rebuilt, not reused.

Each step is timed like run.py's (run.timed_step): whole processes, plus the `os.sync()` after
them; peak RSS from wait4. The watcher column runs on tillage's sealed workspace: `till watch`
with a debounce of an hour (it never seals on its own), then `--runs` timed `till snap`s after
1 changed file and after 100 changed files in 100 folders, with the bytes each seal wrote
(the snap client's ru_oublock and the daemon's /proc write_bytes) and the store's growth.

    python bench/million.py [--files 1000000] [--runs 20] [--tree DIR] [--out FILE]

See bench/README.md, "A million files".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import million_tree
from measure import (
    BenchError,
    machine_facts,
    proc_cpu_seconds,
    proc_field,
    proc_write_bytes,
    run_measured,
    tree_bytes,
)
from run import Step, available_tools, timed_step
from runners import Borg, Restic, Tillage, TillageWatched, Tool

MIB = 1024 * 1024
DEBOUNCE_MS = 3_600_000  # the watcher never seals on its own while a step is timed
STATUS_RUNS = 7
WIDE = 100  # files (each in its own folder) changed before the wide delta seal
START_WAIT_S = 1800.0  # how long a `till watch` that gave up is given to come up anyway
GONE_S = 15.0  # ... unless `till status` shows no watcher, not even a starting one, this long
TREE_BYTES_PER_FILE = 4_800  # allocated on ext4: a 4 KiB block per file, folders, the stamp
STORE_BYTES_PER_FILE = 2_000  # room for the largest store (one is deleted before the next)
COLUMNS = ("tillage", "tillage+watch", "borg", "restic")
TOOL_NAMES = ("tillage", "borg", "restic")  # `tillage` runs both tillage columns
Log = Callable[[str], None]


class Edits:
    """Files the run changed, with what they held before, so the tree can be put back."""

    def __init__(self, root: Path, candidates: list[str]) -> None:
        self.root = root
        self.candidates = candidates
        self.saved: dict[str, tuple[bytes, int, int]] = {}
        self.cursor = 0

    def take(self, n: int) -> list[str]:
        """The next n candidates (each in its own folder; a tiny tree reuses them)."""
        picked = [self.candidates[(self.cursor + k) % len(self.candidates)] for k in range(n)]
        self.cursor += n
        return picked

    def change(self, rels: list[str], tag: str) -> None:
        """Append one line to each file, saving its bytes and times first."""
        for rel in rels:
            path = self.root / rel
            if rel not in self.saved:
                st = path.stat()
                self.saved[rel] = (path.read_bytes(), st.st_atime_ns, st.st_mtime_ns)
            with open(path, "ab") as f:
                f.write(f"\n// changed by bench/million.py: {tag}\n".encode())

    def restore(self) -> None:
        """Put every changed file back byte-exact, with its times."""
        for rel, (data, atime, mtime) in self.saved.items():
            path = self.root / rel
            path.write_bytes(data)
            os.utime(path, ns=(atime, mtime))
        self.saved.clear()
        self.cursor = 0


class MillionBorg(Borg):
    """borg with one new archive name per delta seal (runners.Borg always writes a2)."""

    archives = 1

    def delta_seal(self) -> None:
        self.archives += 1
        self.exec(["borg", "create", "-C", "zstd,3", f"{self.store}::a{self.archives}", "."])


class Watched(TillageWatched):
    """tillage+watch; with `max_watches`, its watcher acts as if inotify allowed only that
    many watches (tillage's test hook), to measure what happens beyond the limit."""

    max_watches: int | None = None

    def env(self) -> dict[str, str]:
        env = super().env()
        if self.max_watches is not None:
            env |= {"TILLAGE_WATCH_DEBUG": "1", "TILLAGE_WATCH_MAX_WATCHES": str(self.max_watches)}
        return env


RUNNERS: dict[str, type[Tool]] = {"tillage": Tillage, "borg": MillionBorg, "restic": Restic}


def timed(tool: Tool, action: Callable[[], object]) -> Step:
    """run.timed_step, with the bytes each process itself wrote (ru_oublock) kept."""

    def run() -> None:
        action()

    step = timed_step(tool, run)
    for record, proc in zip(step.processes, tool.procs, strict=True):
        record["write_bytes"] = proc.out_blocks * 512
    return step


def nearest_rank(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (p95 of 20 runs is the 19th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def store_size(tool: Tool) -> int:
    return tree_bytes(tool.store_paths())[0]


def seal_round(tool: Tool, edits: Edits, width: int, tag: str, pid: int | None) -> dict[str, Any]:
    """Change `width` files, seal once (timed); the seal's writes and the store's growth."""
    edits.change(edits.take(width), tag)
    size0 = store_size(tool)
    io0 = proc_write_bytes(pid) if pid else 0
    step = timed(tool, tool.delta_seal)
    daemon = proc_write_bytes(pid) - io0 if pid else 0
    client = sum(int(p["write_bytes"]) for p in step.processes)
    return {
        "seconds": step.seconds,
        "client_write_bytes": client,
        "daemon_write_bytes": daemon,
        "write_bytes": client + daemon,
        "growth_bytes": store_size(tool) - size0,
        "step": asdict(step),
    }


def cold_and_delta(tool: Tool, edits: Edits, args: argparse.Namespace, log: Log) -> dict[str, Any]:
    """Store init + first backup (timed), its size and peak RSS, then `--delta-runs` seals
    of one changed file each, no watcher."""
    init = timed(tool, tool.init)
    if not init.processes:  # tillage: `watch --no-daemon` creates its store itself
        init.seconds = init.sync_s = 0.0
    cold = timed(tool, tool.cold_seal)
    size = tree_bytes(tool.store_paths())
    log(f"cold seal {init.seconds + cold.seconds:.1f} s, store {size[0] / MIB:.1f} MiB")
    deltas = [
        seal_round(tool, edits, 1, f"{tool.name} delta {n}", None) for n in range(args.delta_runs)
    ]
    log(f"delta seal (1 file) {statistics.median(d['seconds'] for d in deltas):.2f} s")
    return {
        "rows": {
            "cold_s": init.seconds + cold.seconds,
            "cold_rss_mib": max(init.max_rss_kib, cold.max_rss_kib) / 1024,
            "store_mib": size[0] / MIB,
            "delta_s": statistics.median(d["seconds"] for d in deltas),
            "delta_growth_mib": statistics.median(d["growth_bytes"] for d in deltas) / MIB,
        },
        "steps": {"init": asdict(init), "cold_seal": asdict(cold), "deltas": deltas},
        "store_allocated_bytes": size[1],
    }


def inotify_watches(pid: int) -> int | None:
    """Watches held by the process's inotify descriptors (/proc/PID/fdinfo), None unreadable."""
    total, found = 0, False
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                found = True
                info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
                total += sum(1 for line in info if line.startswith("inotify wd:"))
    except OSError:
        return None
    return total if found else None


def watcher_of(tool: TillageWatched) -> dict[str, Any]:
    """`till --json status`'s watcher object ({} when none is running)."""
    watcher = tool.till("status").get("watcher")
    return watcher if isinstance(watcher, dict) else {}


def start_watcher(tool: TillageWatched, log: Log) -> tuple[Step, dict[str, Any], str | None]:
    """`till watch` timed until it returns. If it gave up waiting for the daemon (issue 26,
    item 8), the watcher is polled until it is up, and the step's time runs until then."""
    failed = None
    started = time.perf_counter()
    try:
        step = timed(tool, partial(tool.till, "watch", "--debounce-ms", str(DEBOUNCE_MS)))
    except BenchError as exc:
        failed = str(exc).splitlines()[0][:300]
        step = Step(0.0, 0.0, 0.0, 0, [{"error": str(exc)[:2000]}])
        log(f"`till watch` failed: {failed}")
    seen = time.perf_counter()
    while True:
        watcher = watcher_of(tool)
        if watcher.get("pid") and watcher.get("mode") not in (None, "starting"):
            break
        now = time.perf_counter()
        seen = now if watcher else seen
        if now - started > START_WAIT_S or now - seen > GONE_S:
            raise BenchError(f"tillage: no watcher {now - started:.0f} s after `till watch`")
        time.sleep(0.5)
    if failed is None:
        return step, watcher, None
    step.seconds = time.perf_counter() - started
    return (
        step,
        watcher,
        f"`till watch` failed ({failed}); the watcher was up {step.seconds:.1f} s after it started",
    )


def idle(tool: TillageWatched, pid: int, seconds: float) -> dict[str, float]:
    """The daemon over `seconds` of a quiet folder: CPU, disk writes, RSS, snapshots added."""
    before = int(tool.till("status")["snapshots"])
    cpu0, io0, t0 = proc_cpu_seconds(pid), proc_write_bytes(pid), time.perf_counter()
    time.sleep(seconds)
    cpu1, io1, t1 = proc_cpu_seconds(pid), proc_write_bytes(pid), time.perf_counter()
    rss = _kib(pid, "VmRSS") / 1024
    return {
        "idle_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "idle_write_bytes": float(io1 - io0),
        "idle_rss_mib": rss,
        "idle_snapshots": float(int(tool.till("status")["snapshots"]) - before),
    }


def watched(
    tool: TillageWatched, edits: Edits, args: argparse.Namespace, folders: int, log: Log
) -> dict[str, Any]:
    """The watcher column: start, watches, delta seals of 1 and 100 files, status, idle."""
    start, watcher, note = start_watcher(tool, log)
    pid = int(watcher["pid"])
    rows: dict[str, Any] = {"watch_start_s": start.seconds}
    rows["watches"] = watcher.get("watches")
    extra: dict[str, Any] = {
        "watcher": watcher,
        "note": note,
        "fdinfo_watches": inotify_watches(pid),
    }
    log(
        f"`till watch` start {start.seconds:.1f} s, "
        f"{rows['watches']} watches ({watcher.get('mode')})"
    )
    limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    extra["max_user_watches"] = limit
    if isinstance(tool, Watched) and tool.max_watches is not None:
        limit = min(limit, tool.max_watches)
        extra["max_watches_pretended"] = tool.max_watches
    if limit < folders:
        extra["beyond_limit"] = {k: watcher.get(k) for k in ("mode", "reason", "unwatched")}
    first = timed(tool, tool.delta_seal)  # the first seal against the watcher's change log
    extra["first_snap"] = asdict(first)
    for width, key in ((1, "delta1"), (WIDE, "delta100")):
        rounds = [seal_round(tool, edits, width, f"watch {key} {n}", pid) for n in range(args.runs)]
        secs = [r["seconds"] for r in rounds]
        writes = [float(r["write_bytes"]) for r in rounds]
        rows[f"{key}_p50"] = nearest_rank(secs, 0.5)
        rows[f"{key}_p95"] = nearest_rank(secs, 0.95)
        rows[f"{key}_write_mib"] = statistics.median(writes) / MIB
        rows[f"{key}_write_p95_mib"] = nearest_rank(writes, 0.95) / MIB
        rows[f"{key}_growth_kib"] = statistics.median(r["growth_bytes"] for r in rounds) / 1024
        extra[key] = rounds
        log(
            f"{key}: p50 {rows[f'{key}_p50']:.2f} s, p95 {rows[f'{key}_p95']:.2f} s, "
            f"{rows[f'{key}_write_mib']:.2f} MiB written per seal"
        )
    status = [*tool.command, "--repo", str(tool.ws), "--json", "status"]
    samples = [
        run_measured(status, cwd=tool.ws, env=tool.env()).seconds for _ in range(STATUS_RUNS)
    ]
    rows["status_s"] = statistics.median(samples)
    rows["daemon_rss_mib"] = _kib(pid, "VmRSS") / 1024
    rows["daemon_peak_rss_mib"] = _kib(pid, "VmHWM") / 1024
    if args.idle_seconds > 0:
        # As run.py does: the idle watcher has its default debounce, so a stray event would
        # be sealed inside the window; its start is timed too (the tree is sealed, unchanged).
        stopping = time.perf_counter()
        tool.till("watch", "--stop")
        extra["stop_s"] = time.perf_counter() - stopping
        restart = timed(tool, partial(tool.till, "watch"))
        pid = int(watcher_of(tool)["pid"])
        extra["idle_watcher_start"] = asdict(restart)
        rows["watch_restart_s"] = restart.seconds
        time.sleep(min(2.0, args.idle_seconds))  # let the restart settle first
        rows.update(idle(tool, pid, args.idle_seconds))
        log(
            f"idle {args.idle_seconds:.0f} s (restarted in {restart.seconds:.1f} s): "
            f"{rows['idle_cpu_pct']:.2f}% CPU, {rows['idle_write_bytes']:.0f} B written, "
            f"RSS {rows['idle_rss_mib']:.0f} MiB"
        )
    return {"rows": rows, **extra, "status_samples": samples}


def _kib(pid: int, field: str) -> int:
    """A KiB figure of /proc/PID/status (VmRSS, VmHWM)."""
    return int(proc_field(f"/proc/{pid}/status", field).split()[0])


def stop_watcher(tool: TillageWatched, root: Path, log: Log) -> None:
    """`till watch --stop`; then make sure no daemon over `root` survives (by its pid)."""
    try:
        tool.till("watch", "--stop")
    except BenchError as exc:
        log(f"`till watch --stop` failed: {str(exc).splitlines()[0][:200]}")
    for pid in daemons_over(root):
        log(f"a watcher (pid {pid}) survived `till watch --stop`: SIGTERM")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)


def daemons_over(root: Path) -> list[int]:
    """tillage processes whose command line names `root` (only this run's tree)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(b"tillage" in a for a in argv) and str(root).encode() in argv:
                found.append(int(entry.name))
    return found


def run_tillage(
    run_dir: Path, root: Path, edits: Edits, args: argparse.Namespace, folders: int, log: Log
) -> dict[str, Any]:
    """tillage alone (cold, delta), then its watcher on the same sealed workspace."""
    alone = Tillage(run_dir, root)
    out: dict[str, Any] = {"tillage": cold_and_delta(alone, edits, args, log)}
    if args.no_watch:
        return out
    tool = Watched(run_dir, root)  # the same TILLAGE_HOME: the workspace is sealed
    tool.max_watches = args.max_watches
    try:
        out["tillage+watch"] = watched(tool, edits, args, folders, log)
    finally:
        stop_watcher(tool, root, log)
    return out


def pristine(root: Path, edits: Edits, top: set[str]) -> None:
    """Undo what a tool and its delta steps changed in the tree (`top`: its entries before)."""
    edits.restore()
    shutil.rmtree(root / ".tillage", ignore_errors=True)
    left = sorted(set(os.listdir(root)) - top)
    if left:
        raise BenchError(f"the tree holds {left} after a tool ran: remove them and rerun")


def room(where: Path, need: int, inodes: int, what: str) -> None:
    """Stop before starting when the file system cannot hold `what`."""
    st = os.statvfs(where)
    if st.f_bavail * st.f_frsize < need or st.f_favail < inodes:
        raise SystemExit(
            f"{where} has {st.f_bavail * st.f_frsize / 2**30:.1f} GiB and {st.f_favail:,} "
            f"inodes free; {what} needs about {need / 2**30:.1f} GiB and {inodes:,} inodes"
        )


def prepare_tree(args: argparse.Namespace, scratch: Path, log: Log) -> tuple[Path, dict[str, Any]]:
    """The tree to seal: the kept one when its stamp matches, else a fresh build."""
    root = (args.tree or scratch / "tree").resolve()
    if million_tree.reusable(root, args.files, args.seed, args.fanout):
        log(f"reusing the tree in {root}")
    else:
        if root.exists() and any(root.iterdir()):
            if million_tree.read_stamp(root) is None:
                raise SystemExit(f"{root} is not empty and was not built by bench/million.py")
            log(f"{root} was built otherwise or left in use: rebuilding it")
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        room(root, args.files * TREE_BYTES_PER_FILE, int(args.files * 1.2), "the tree")
        log(f"building {args.files} files (seed {args.seed}) in {root}")
        started = time.perf_counter()
        million_tree.build(root, args.files, args.seed, args.fanout)
        os.sync()
        log(f"built in {time.perf_counter() - started:.0f} s (os.sync included)")
    stamp = million_tree.read_stamp(root)
    assert stamp is not None
    log(
        f"tree: {stamp['files']} files in {stamp['folders']} folders, "
        f"{stamp['bytes'] / MIB:.0f} MiB"
    )
    return root, stamp


# (label, column key, row key, format); targets follow in TARGETS.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("cold seal (s)", "cold_s", "{:.1f}"),
    ("cold seal peak RSS (MiB)", "cold_rss_mib", "{:.0f}"),
    ("store size after it (MiB)", "store_mib", "{:.1f}"),
    ("delta seal, 1 file changed, no watcher (s)", "delta_s", "{:.2f}"),
    ("↳ store growth (MiB)", "delta_growth_mib", "{:.2f}"),
    ("`till watch` start (s)", "watch_start_s", "{:.1f}"),
    ("↳ inotify watches", "watches", "{:.0f}"),
    ("↳ again, default debounce, before the idle window (s)", "watch_restart_s", "{:.1f}"),
    ("delta seal, 1 file, watcher: p50 (s)", "delta1_p50", "{:.2f}"),
    ("delta seal, 1 file, watcher: p95 (s)", "delta1_p95", "{:.2f}"),
    ("↳ written per seal, median (MiB)", "delta1_write_mib", "{:.2f}"),
    ("↳ written per seal, p95 (MiB)", "delta1_write_p95_mib", "{:.2f}"),
    ("↳ store growth per seal (KiB)", "delta1_growth_kib", "{:.1f}"),
    ("delta seal, 100 files, watcher: p50 (s)", "delta100_p50", "{:.2f}"),
    ("delta seal, 100 files, watcher: p95 (s)", "delta100_p95", "{:.2f}"),
    ("↳ written per seal, median (MiB)", "delta100_write_mib", "{:.2f}"),
    ("↳ store growth per seal (KiB)", "delta100_growth_kib", "{:.1f}"),
    ("`till status` with watcher (s)", "status_s", "{:.2f}"),
    ("idle watcher CPU (% of a core)", "idle_cpu_pct", "{:.2f}"),
    ("idle watcher disk writes (bytes)", "idle_write_bytes", "{:.0f}"),
    ("idle watcher RSS (MiB)", "idle_rss_mib", "{:.0f}"),
    ("idle watcher snapshots added", "idle_snapshots", "{:.0f}"),
    ("watcher RSS after the timed seals (MiB)", "daemon_rss_mib", "{:.0f}"),
    ("↳ its peak, VmHWM (MiB)", "daemon_peak_rss_mib", "{:.0f}"),
)


def _targets(values: dict[str, dict[str, Any]]) -> dict[str, tuple[str, float | None, float]]:
    """Row key -> (target text, the figure compared, its limit), from the issue's targets."""
    t, w, b = (values.get(c, {}) for c in ("tillage", "tillage+watch", "borg"))

    def ratio(num: Any, den: Any) -> float | None:
        return num / den if isinstance(num, (int, float)) and den else None

    return {
        "cold_s": ("≤ 1.0x borg", ratio(t.get("cold_s"), b.get("cold_s")), 1.0),
        "cold_rss_mib": ("≤ 1.0x borg", ratio(t.get("cold_rss_mib"), b.get("cold_rss_mib")), 1.0),
        "watch_start_s": (
            "≤ 0.5x tillage cold",
            ratio(w.get("watch_start_s"), t.get("cold_s")),
            0.5,
        ),
        "delta1_p95": ("≤ 1 s", w.get("delta1_p95"), 1.0),
        "delta100_p95": ("≤ 1 s", w.get("delta100_p95"), 1.0),
        "delta1_write_p95_mib": ("≤ 1 MiB", w.get("delta1_write_p95_mib"), 1.0),
        "idle_rss_mib": ("≤ 300 MiB", w.get("idle_rss_mib"), 300.0),
    }


def table(
    values: dict[str, dict[str, Any]], absent: dict[str, str]
) -> tuple[str, list[dict[str, Any]]]:
    """The Markdown table and its rows as data (values, tillage/borg ratio, verdict)."""
    targets = _targets(values)
    head = ["measure", *COLUMNS, "tillage/borg", "target", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = []
    for label, key, fmt in ROWS:
        cells = {c: values.get(c, {}).get(key) for c in COLUMNS}
        if all(v is None for v in cells.values()) and not any(c in absent for c in COLUMNS):
            continue
        text = [label]
        for c in COLUMNS:
            v = cells[c]
            text.append(
                fmt.format(v)
                if isinstance(v, (int, float))
                else absent.get(c, "—")
                if v is None and c in absent
                else "—"
            )
        tb = cells["tillage"], cells["borg"]
        ratio = (
            tb[0] / tb[1]
            if isinstance(tb[0], (int, float)) and isinstance(tb[1], (int, float)) and tb[1]
            else None
        )
        text.append(f"{ratio:.2f}x" if ratio is not None else "")
        target, figure, limit = targets.get(key, ("", None, 0.0))
        verdict = (
            "" if not target else "n/a" if figure is None else "PASS" if figure <= limit else "MISS"
        )
        text += [
            target,
            verdict + (f" ({figure:.2f})" if figure is not None and "x" in target else ""),
        ]
        lines.append("| " + " | ".join(text) + " |")
        rows.append(
            {
                "measure": label,
                "key": key,
                "values": cells,
                "tillage_borg": ratio,
                "target": target,
                "figure": figure,
                "limit": limit if target else None,
                "verdict": verdict or None,
            }
        )
    return "\n".join(lines), rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000, help="files in the tree")
    parser.add_argument("--seed", type=int, default=0, help="the tree's seed")
    parser.add_argument(
        "--fanout",
        type=int,
        default=million_tree.FANOUT,
        help="top-level packages per project's node_modules (0: one flat node_modules)",
    )
    parser.add_argument(
        "--tree", type=Path, help="keep the built tree here; reused when its stamp matches"
    )
    parser.add_argument(
        "--runs", type=int, default=20, help="timed seals per width with the watcher"
    )
    parser.add_argument(
        "--delta-runs", type=int, default=1, help="delta seals per tool without a watcher"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=60.0, help="idle watcher window (0: skip)"
    )
    parser.add_argument(
        "--tools", default=",".join(TOOL_NAMES), help="comma list of tillage,borg,restic"
    )
    parser.add_argument("--no-watch", action="store_true", help="skip the tillage+watch column")
    parser.add_argument(
        "--max-watches",
        type=int,
        help="the watcher acts as if inotify allowed only N watches (rescan mode beyond it)",
    )
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument(
        "--workdir", type=Path, help="parent of the scratch dir (stores; the tree unless --tree)"
    )
    parser.add_argument("--out", type=Path, help="write everything as JSON here")
    parser.add_argument(
        "--fail-on-target", action="store_true", help="exit 3 when a target is missed"
    )
    args = parser.parse_args(argv)
    args.tools = [t.replace("tillage+watch", "tillage") for t in args.tools.split(",") if t]
    unknown = set(args.tools) - set(TOOL_NAMES)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}; choose from {','.join(TOOL_NAMES)}")
    if args.runs < 1 or args.delta_runs < 1 or args.files < 10:
        parser.error("--runs and --delta-runs must be at least 1, --files at least 10")
    return args


def benchmark(args: argparse.Namespace, scratch: Path, log: Log) -> dict[str, Any]:
    """Build or reuse the tree, then run each tool in turn on it, restoring it after each."""
    wanted = [t for t in TOOL_NAMES if t in args.tools]
    ready, skipped = available_tools(wanted, log, RUNNERS)
    load_before = os.getloadavg()[0]
    versions = {name: RUNNERS[name].version() for name in ready}
    room(scratch, args.files * STORE_BYTES_PER_FILE, 10_000, "the largest store")
    root, stamp = prepare_tree(args, scratch, log)
    edits = Edits(root, list(stamp["edit_candidates"]))
    top = set(os.listdir(root))
    million_tree.write_stamp(root, {**stamp, "clean": False})  # in use until put back
    results: dict[str, Any] = {"tools": {}, "failed": {}}
    clean = True  # the tree is as built, until a tool starts
    try:
        for name in ready:
            clean = False
            run_dir = scratch / name
            run_dir.mkdir()
            tlog: Log = partial(lambda n, m: log(f"[{n}] {m}"), name)
            try:
                if name == "tillage":
                    results["tools"].update(
                        run_tillage(run_dir, root, edits, args, stamp["folders"], tlog)
                    )
                else:
                    results["tools"][name] = cold_and_delta(
                        RUNNERS[name](run_dir, root), edits, args, tlog
                    )
            except BenchError as exc:
                tlog(f"FAILED: {exc}")
                results["failed"][name] = str(exc)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
                pristine(root, edits, top)
                clean = True
    finally:
        edits.restore()
        if clean:  # else the stamp keeps saying "in use": a later run rebuilds the tree
            million_tree.write_stamp(root, stamp)
    tree = {k: v for k, v in stamp.items() if k != "edit_candidates"}
    machine = machine_facts(scratch, load_before)
    machine["tree_fs"] = machine_facts(root)["workdir_fs"]
    return {
        "machine": machine,
        "versions": versions,
        "skipped": skipped,
        "tree": {**tree, "path": str(root)},
        **results,
    }


def report(results: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> str:
    """The Markdown table with the facts a reader needs to judge it."""
    absent = {
        **{n: "skipped" for n in results["skipped"]},
        **{n: "FAILED" for n in results["failed"]},
    }
    if "tillage" in absent:
        absent["tillage+watch"] = absent["tillage"]
    values = {name: r["rows"] for name, r in results["tools"].items()}
    text, rows = table(values, absent)
    results["table"] = rows
    tree, m = results["tree"], results["machine"]
    lines = [
        f"Tree: {tree['files']:,} files in {tree['folders']:,} folders, "
        f"{tree['bytes'] / MIB:.1f} MiB (seed {tree['seed']}). "
        f"Machine: {m['nproc']} cores, {m['cpu']}, {m['memory']}, {m['workdir_fs']}, "
        f"load {m['load_before']:.2f} before.",
        f"Versions: {'; '.join(results['versions'].values())}.",
        f"Command: `python bench/million.py {shlex.join(argv)}`",
        "",
        text,
    ]
    w = results["tools"].get("tillage+watch")
    if w:
        lines.append("")
        lines.append(
            f"Watcher: mode {w['watcher'].get('mode')}, {w['watcher'].get('watches')} watches "
            f"(fdinfo: {w['fdinfo_watches']}), "
            f"fs.inotify.max_user_watches {w['max_user_watches']}, "
            f"{tree['folders']} folders; timed seals: {args.runs} per width."
        )
        if "max_watches_pretended" in w:
            lines.append(
                f"The watcher ran as if inotify allowed {w['max_watches_pretended']} watches "
                "(--max-watches)."
            )
        if "beyond_limit" in w:
            lines.append(
                f"Beyond the inotify limit, `till status` says: {json.dumps(w['beyond_limit'])}"
            )
        if w.get("note"):
            lines.append(f"Note: {w['note']}")
    return "\n".join(lines)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run it; 1 if a tool failed, 3 (with --fail-on-target) when a target is missed."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # Ctrl-C, and SIGTERM (a `kill`, a timeout), unwind through the finally blocks that stop
    # the watcher and put the tree back; a shell's background job would otherwise ignore
    # SIGINT, and SIGTERM would end the run with a daemon left over the tree.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminated)
    if args.till:
        Tillage.command = shlex.split(args.till)
    began = time.monotonic()

    def log(message: str) -> None:
        print(f"{time.strftime('%H:%M:%SZ', time.gmtime())} {message}", file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tillage-million-", dir=args.workdir)).resolve()
    log(f"scratch dir: {scratch}")
    try:
        results = benchmark(args, scratch, log)
    except BenchError as exc:
        log(f"FAILED: {exc}")
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results["elapsed_s"] = time.monotonic() - began
    print(report(results, args, argv))
    results["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"done in {results['elapsed_s']:.0f} s")
    if results["failed"]:
        return 1
    if args.fail_on_target and any(r["verdict"] in ("MISS", "n/a") for r in results["table"]):
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
