"""Benchmark the agent door: `till mcp` calls against a fresh `till` process per call.

An agent calls tillage many times a session. `till mcp` (issue 9) is one long-lived process that
keeps the store open, so a call should cost the work, not a start-up. On the standard workload
(bench/workload.py, seed 0: ~5,000 files, ~244 MiB), attached once (`till watch`), one run
measures, alternating which side of each pair goes first (so drift hits both sides alike):

1. `workspace_snapshots` (`limit` 20) through one live `till mcp` subprocess, as a harness runs
   it (the official SDK's client over stdio), against `till --json timeline -n 20` as a fresh
   process each time; with the workspace's watcher running (the CLI then goes through the
   watcher's socket, hosts/cli/fast.py) and without it (`till watch --stop`). --calls calls a
   side per repeat; per-call medians.
2. `workspace_snap` after 10 changed files (their content rewritten between calls) through the
   same server, against `till --json snap` as a fresh process, with and without the watcher;
   each timed until durable (the `sync` after it is part of the figure, after a `sync` before).
3. Cold start: spawn `till mcp` until the first `tools/list` answer (the SDK's client
   handshake included); the server's resident memory (VmRSS, VmHWM from /proc) after the calls,
   beside the watcher daemon's.
4. `python -c pass`, in the same rounds as the CLI calls: the floor of any Python process.
5. `initialize`: spawn `till mcp` and write one raw `initialize` request; the time until its
   answer is read (what a harness waits before it may list tools), median of --initialize cold
   starts, against `python -c pass` (issue 23: at most 1 s on the 2-core machine).
6. Hook latency (bench/hook_latency.py): Claude Code's hooks as `till hook install` writes them,
   run as Claude Code runs them (its JSON payloads on stdin), per event, with the watcher
   running, without it, and with it stopped by SIGSTOP (--hook-rounds sessions each;
   --hooks-only measures this part alone).

Figures are medians over --repeat runs (of per-run medians); ratios are ratios of medians. The
Markdown table (stdout) says PASS or MISS per target. See bench/README.md ("The agent door").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

# Sibling modules: `python bench/agents.py` puts bench/ first on sys.path.
import hook_latency
import workload
from measure import BenchError, Proc, durable_sync, machine_facts, run_measured, tail
from runners import Tillage

MIB = 1024 * 1024
BUSY_LOAD = 0.5  # 1-minute load average above which the machine was not quiet
LIMIT = 20  # snapshots asked for, by both sides
CHANGED_FILES = 10  # files rewritten before each snap
# The watcher's debounce while the table is measured: far longer than any step, so it never
# seals the changed files on its own before the timed snap does (as bench/run.py does).
TABLE_DEBOUNCE_MS = 600_000

# Targets (issue 9: "calls are cheap"). Ratios of the MCP figure to a fresh `till` process.
ROUND_TRIP_TARGET = 0.1  # workspace_snapshots round trip / `till --json timeline -n 20`
SNAP_WATCHED_TARGET = 0.5  # workspace_snap / `till --json snap`, watcher running
SNAP_ALONE_TARGET = 1.0  # workspace_snap / `till --json snap`, no watcher: never slower
COLD_START_TARGET_S = 1.0  # spawn `till mcp` to the first tools/list answer
INITIALIZE_TARGET_S = 1.0  # spawn `till mcp` to its `initialize` answer (issue 23)

MODES = ("watch", "alone")  # the watcher running, or no watcher
MODE_LABEL = {"watch": "watcher running", "alone": "no watcher"}

Log = Callable[[str], None]


def python_of_till() -> str:
    """The interpreter that runs `till` (its bare start-up is the floor)."""
    if Tillage.command[1:3] == ["-m", "tillage"]:
        return Tillage.command[0]
    return sys.executable


@dataclass
class Bench:
    """One attached workspace, its store, and how to run `till` against them."""

    ws: Path
    home: Path
    log: Log
    rng: random.Random = field(default_factory=lambda: random.Random(9))
    edits: int = 0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["TILLAGE_HOME"] = str(self.home)
        return env

    def till(self, *args: str) -> tuple[Proc, dict[str, Any]]:
        """`till --json ARGS` in the workspace, as an agent runs it: the process and its one
        JSON document (an error document or a bad exit is a BenchError)."""
        proc = run_measured([*Tillage.command, "--json", *args], cwd=self.ws, env=self.env())
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = None
        if proc.returncode != 0 or not isinstance(doc, dict) or "error" in doc:
            raise BenchError(
                f"`till {' '.join(args)}` exited {proc.returncode}\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return proc, doc

    def server_params(self) -> StdioServerParameters:
        """`till --repo WS mcp`, as a harness launches it."""
        return StdioServerParameters(
            command=Tillage.command[0],
            args=[*Tillage.command[1:], "--repo", str(self.ws), "mcp"],
            env=self.env(),
            cwd=str(self.ws),
        )

    def start_watcher(self) -> None:
        """`till watch` with the table's long debounce (untimed; it seals what is pending)."""
        _proc, doc = self.till("watch", "--debounce-ms", str(TABLE_DEBOUNCE_MS))
        if doc.get("watching") is not True:
            raise BenchError(f"`till watch` did not start the watcher: {doc!r}")

    def stop_watcher(self) -> None:
        self.till("watch", "--stop")

    def watcher_pid(self) -> int | None:
        _proc, doc = self.till("status")
        watcher = doc.get("watcher")
        pid = watcher.get("pid") if isinstance(watcher, dict) else None
        return pid if doc.get("watching") is True and isinstance(pid, int) else None

    def change_files(self, paths: list[str]) -> None:
        """Rewrites each file with new content (a line in its middle replaced), as an agent's
        edit does: content changes, not just the mtime."""
        self.edits += 1
        for rel in paths:
            path = self.ws / rel
            lines = path.read_text().split("\n")
            lines[len(lines) // 2] = f"# edit {self.edits} by the agents bench: {rel}"
            path.write_text("\n".join(lines))


# -- the MCP server, as a harness holds it ------------------------------------------------------


def server_pid(ws: Path) -> int:
    """The PID of this process's `till ... mcp` child serving `ws` (the SDK does not say it)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"mcp" in argv and str(ws).encode() in argv:
            return int(entry.name)
    raise BenchError(f"no `till mcp` child of this process serves {ws}")


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB: resident now, and at most so far."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


async def mcp_snapshots(client: Client) -> tuple[float, list[str]]:
    """One `workspace_snapshots` round trip: seconds, and the IDs it listed."""
    started = time.perf_counter()
    result = await client.call_tool("workspace_snapshots", {"limit": LIMIT})
    seconds = time.perf_counter() - started
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    if result.is_error or not isinstance(result.structured_content, dict):
        raise BenchError(f"workspace_snapshots failed: {result.content!r}")
    # The IDs a model reads: the text lists all 20, each whole (the structured result is cut
    # to the same 4,000 bytes, and 20 whole snapshot objects do not fit).
    return seconds, re.findall(r"^- ([0-9a-f]{64}) ", text, re.MULTILINE)


async def mcp_snap(client: Client) -> tuple[float, str]:
    """One `workspace_snap`, after a sync, timed until durable: seconds and the snapshot ID."""
    os.sync()
    started = time.perf_counter()
    result = await client.call_tool("workspace_snap", {})
    seconds = time.perf_counter() - started + durable_sync()
    doc = result.structured_content
    if result.is_error or not isinstance(doc, dict):
        raise BenchError(f"workspace_snap failed: {result.content!r}")
    return seconds, str(doc["snapshot"]["id"])


def cli_snapshots(bench: Bench) -> tuple[float, list[str]]:
    """`till --json timeline -n 20` as a fresh process: seconds, and the IDs it listed."""
    proc, doc = bench.till("timeline", "-n", str(LIMIT))
    return proc.seconds, [s["id"] for s in doc["snapshots"]]


def cli_snap(bench: Bench) -> tuple[float, str]:
    """`till --json snap` as a fresh process, after a sync, timed until durable."""
    os.sync()
    proc, doc = bench.till("snap")
    return proc.seconds + durable_sync(), str(doc["snapshot"]["id"])


def bare_python() -> float:
    """`python -c pass`: the start-up every Python process pays, the floor of a CLI call."""
    proc = run_measured([python_of_till(), "-c", "pass"], cwd=Path.cwd(), env=dict(os.environ))
    return proc.seconds


# -- the parts ----------------------------------------------------------------------------------


async def snapshots_part(bench: Bench, client: Client, calls: int, flip: bool) -> dict[str, float]:
    """`calls` rounds of (MCP round trip, CLI process, `python -c pass`), the order rotated
    every round; per-call medians. Both sides must list the same 20 snapshots."""
    samples: dict[str, list[float]] = {"mcp": [], "cli": [], "bare": []}
    listed: dict[str, list[str]] = {}

    async def mcp() -> None:
        seconds, ids = await mcp_snapshots(client)
        samples["mcp"].append(seconds)
        listed["mcp"] = ids

    async def cli() -> None:
        seconds, ids = cli_snapshots(bench)
        samples["cli"].append(seconds)
        listed["cli"] = ids

    async def bare() -> None:
        samples["bare"].append(bare_python())

    sides = [mcp, cli, bare]
    for n in range(calls):
        shift = (n + flip) % len(sides)
        for side in sides[shift:] + sides[:shift]:
            await side()
        if listed["mcp"] != listed["cli"] or len(listed["mcp"]) != LIMIT:
            raise BenchError(
                f"workspace_snapshots and `till timeline -n {LIMIT}` disagree: "
                f"{len(listed['mcp'])} against {len(listed['cli'])} snapshots"
            )
    return {key: statistics.median(values) for key, values in samples.items()}


async def snap_part(bench: Bench, client: Client, snaps: int, flip: bool) -> dict[str, float]:
    """`snaps` pairs of (MCP snap, CLI snap), each after the same 10 files were rewritten, the
    order alternating; medians, each timed until durable. Every snap must seal a new snapshot."""
    sources = workload.source_files(bench.ws)
    samples: dict[str, list[float]] = {"mcp": [], "cli": []}
    last = {"id": ""}

    async def mcp(paths: list[str]) -> None:
        bench.change_files(paths)
        seconds, ident = await mcp_snap(client)
        record("mcp", seconds, ident)

    async def cli(paths: list[str]) -> None:
        bench.change_files(paths)
        record("cli", *cli_snap(bench))

    def record(side: str, seconds: float, ident: str) -> None:
        if ident == last["id"]:
            raise BenchError(f"{side} snap after {CHANGED_FILES} changed files sealed nothing new")
        last["id"] = ident
        samples[side].append(seconds)

    for n in range(snaps):
        paths = bench.rng.sample(sources, CHANGED_FILES)
        pair = [mcp, cli] if (n + flip) % 2 == 0 else [cli, mcp]
        for side in pair:
            await side(paths)
    return {key: statistics.median(values) for key, values in samples.items()}


async def cold_part(bench: Bench, runs: int, flip: bool) -> dict[str, float]:
    """`runs` pairs of (spawn `till mcp` to its first tools/list answer, `python -c pass`),
    alternating; medians. The server is closed after each, untimed."""
    samples: dict[str, list[float]] = {"cold": [], "bare": []}
    for n in range(runs):
        pair = ["cold", "bare"] if (n + flip) % 2 == 0 else ["bare", "cold"]
        for side in pair:
            if side == "bare":
                samples["bare"].append(bare_python())
                continue
            started = time.perf_counter()
            async with Client(bench.server_params()) as client:
                tools = await client.list_tools()
                samples["cold"].append(time.perf_counter() - started)
            names = {t.name for t in tools.tools}
            if not {"workspace_snapshots", "workspace_snap"} <= names:
                raise BenchError(f"`till mcp` offered {sorted(names)}")
    return {key: statistics.median(values) for key, values in samples.items()}


# -- initialize ---------------------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "tillage-bench", "version": "0"},
    },
}


def initialize_once(bench: Bench) -> float:
    """Seconds from spawning `till mcp` to reading its `initialize` answer (a raw request, so
    no client library's own start is counted); the server is closed after, untimed."""
    import subprocess

    request = json.dumps(INITIALIZE).encode() + b"\n"
    started = time.perf_counter()
    with subprocess.Popen(
        [*Tillage.command, "--repo", str(bench.ws), "mcp"],
        cwd=bench.ws,
        env=bench.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request)
        proc.stdin.flush()
        line = proc.stdout.readline()
        seconds = time.perf_counter() - started
        proc.stdin.close()
        proc.wait(timeout=60)
    answer = json.loads(line) if line else {}
    if answer.get("id") != 1 or "result" not in answer:
        raise BenchError(f"`till mcp` answered initialize with {line[:300]!r}")
    return seconds


def initialize_part(bench: Bench, runs: int) -> dict[str, Any]:
    """`runs` pairs of (spawn to the `initialize` answer, `python -c pass`), alternating."""
    samples: dict[str, list[float]] = {"initialize": [], "bare": []}
    for n in range(runs):
        for side in ("initialize", "bare") if n % 2 == 0 else ("bare", "initialize"):
            samples[side].append(initialize_once(bench) if side == "initialize" else bare_python())
    return {
        "samples": samples,
        "initialize": statistics.median(samples["initialize"]),
        "bare": statistics.median(samples["bare"]),
    }


def initialize_rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """The `initialize` row of the table (table_rows' shape)."""
    value, bare = measured["initialize"], measured["bare"]
    worst = max(measured["samples"]["initialize"])
    return [
        {
            "measure": "`till mcp` spawn to its `initialize` answer (ms)",
            "value": value,
            "unit": "ms",
            "baseline": "`python -c pass`",
            "baseline_value": bare,
            "ratio": value / bare if bare else None,
            "target": INITIALIZE_TARGET_S * 1000,
            "target_kind": "value",
            "verdict": "PASS" if value <= INITIALIZE_TARGET_S else "MISS",
            "note": f"median of {len(measured['samples']['initialize'])} cold starts, "
            f"worst {worst * 1000:.0f} ms",
        }
    ]


# -- the run ------------------------------------------------------------------------------------


async def measure_all(args: argparse.Namespace, bench: Bench, log: Log) -> dict[str, Any]:
    """The long-lived server and every repeat; the server's memory after the calls."""
    runs: list[dict[str, Any]] = []
    async with Client(bench.server_params()) as client:
        pid = server_pid(bench.ws)
        tools = {t.name for t in (await client.list_tools()).tools}
        if not {"workspace_snapshots", "workspace_snap"} <= tools:
            raise BenchError(f"`till mcp` offered {sorted(tools)}: is the folder attached?")
        # One untimed call of each, as a harness's first calls: nothing is measured cold.
        await mcp_snapshots(client)
        rss_start = memory_mib(pid)
        watching = True
        for repeat in range(1, args.repeat + 1):
            flip = repeat % 2 == 0
            run: dict[str, Any] = {"repeat": repeat}
            for mode in reversed(MODES) if flip else MODES:
                if mode == "watch" and not watching:
                    bench.start_watcher()
                elif mode == "alone" and watching:
                    bench.stop_watcher()
                watching = mode == "watch"
                trips = await snapshots_part(bench, client, args.calls, flip)
                snaps = await snap_part(bench, client, args.snaps, flip)
                run[mode] = {"snapshots": trips, "snap": snaps}
                log(
                    f"repeat {repeat}, {MODE_LABEL[mode]}: workspace_snapshots "
                    f"{trips['mcp'] * 1000:.1f} ms, till timeline {trips['cli'] * 1000:.1f} ms, "
                    f"python -c pass {trips['bare'] * 1000:.1f} ms; workspace_snap "
                    f"{snaps['mcp'] * 1000:.0f} ms, till snap {snaps['cli'] * 1000:.0f} ms"
                )
            if not watching:
                bench.start_watcher()
                watching = True
            run["cold"] = await cold_part(bench, args.cold, flip)
            log(
                f"repeat {repeat}: cold start {run['cold']['cold'] * 1000:.0f} ms "
                f"(python -c pass {run['cold']['bare'] * 1000:.1f} ms)"
            )
            runs.append(run)
        rss_end = memory_mib(pid)
        watcher = bench.watcher_pid()
        memory = {
            "server_rss_start_mib": rss_start[0],
            "server_rss_mib": rss_end[0],
            "server_hwm_mib": rss_end[1],
            "watcher_rss_mib": memory_mib(watcher)[0] if watcher else None,
            "server_calls": args.repeat * len(MODES) * (args.calls + args.snaps) + 1,
        }
    return {"runs": runs, "memory": memory}


def prepare(args: argparse.Namespace, workdir: Path, log: Log) -> tuple[Bench, Any]:
    """The workload, copied once into the workspace, attached with its watcher running, and
    enough snapshots that both sides list LIMIT of them."""
    master = workdir / "workload"
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {master}")
    stats = workload.generate(master, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    ws = workdir / "ws"
    shutil.copytree(master, ws, symlinks=True)
    shutil.rmtree(master)
    bench = Bench(ws=ws, home=workdir / "home", log=log)
    bench.start_watcher()
    marker = ws / "agents-bench-marker.txt"
    for n in range(LIMIT):
        marker.write_text(f"history {n}\n")
        bench.till("snap", "-m", f"history {n}")
    return bench, stats


def benchmark(args: argparse.Namespace, workdir: Path, log: Log) -> dict[str, Any]:
    """Prepares the workspace, measures everything, and returns the results as data."""
    load_before = os.getloadavg()[0]
    bench, stats = prepare(args, workdir, log)
    try:
        if args.hooks_only:
            measured: dict[str, Any] = {"runs": [], "memory": {}}
            initialize: dict[str, Any] | None = None
        else:
            measured = anyio.run(measure_all, args, bench, log)
            initialize = initialize_part(bench, args.initialize)
            log(
                f"initialize: {initialize['initialize'] * 1000:.0f} ms "
                f"(python -c pass {initialize['bare'] * 1000:.1f} ms)"
            )
        hooks = hook_latency.measure(bench, args.hook_rounds, log) if args.hook_rounds else None
    finally:
        with contextlib.suppress(BenchError):
            bench.stop_watcher()
    rows = [] if args.hooks_only else table_rows(measured["runs"], measured["memory"])
    if initialize is not None:
        rows += initialize_rows(initialize)
    if hooks is not None:
        rows += hook_latency.rows(hooks)
    return {
        "command": "python bench/agents.py " + shlex.join(sys.argv[1:]),
        "machine": machine_facts(workdir, load_before),
        "workload": {
            "files": stats.files,
            "bytes": stats.bytes,
            "seed": args.seed,
            "scale": args.scale,
        },
        "repeat": args.repeat,
        "hooks_only": args.hooks_only,
        "calls": args.calls,
        "snaps": args.snaps,
        "cold": args.cold,
        **measured,
        "initialize": initialize,
        "hooks": hooks,
        "rows": rows,
    }


# -- the table ----------------------------------------------------------------------------------


def med(runs: list[dict[str, Any]], *keys: str) -> float:
    """Median over the repeats of one figure, found under `keys` in each run."""
    values = []
    for run in runs:
        value: Any = run
        for key in keys:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def table_rows(runs: list[dict[str, Any]], memory: dict[str, Any]) -> list[dict[str, Any]]:
    """The table as data: one row per figure, with the baseline, ratio, target and verdict."""
    rows: list[dict[str, Any]] = []

    def row(
        label: str,
        value: float,
        unit: str,
        baseline: str = "",
        baseline_value: float | None = None,
        target: float | None = None,
        target_kind: str = "ratio",
        note: str = "",
    ) -> None:
        ratio = value / baseline_value if baseline_value else None
        # A value target is in the unit shown (ms), the value in seconds.
        checked = ratio if target_kind == "ratio" else value * (1000 if unit == "ms" else 1)
        verdict = (
            ""
            if target is None
            else "PASS"
            if checked is not None and checked <= target
            else "MISS"
        )
        rows.append(
            {
                "measure": label,
                "value": value,
                "unit": unit,
                "baseline": baseline,
                "baseline_value": baseline_value,
                "ratio": ratio,
                "target": target,
                "target_kind": target_kind,
                "verdict": verdict,
                "note": note,
            }
        )

    bare = med(runs, "watch", "snapshots", "bare")
    for mode in MODES:
        cli = med(runs, mode, "snapshots", "cli")
        mcp = med(runs, mode, "snapshots", "mcp")
        door = "through the watcher's socket" if mode == "watch" else "the whole command line"
        row(
            f"`workspace_snapshots` round trip, {MODE_LABEL[mode]} (ms)",
            mcp,
            "ms",
            f"`till --json timeline -n {LIMIT}` ({door})",
            cli,
            ROUND_TRIP_TARGET,
            note=f"CLI is {cli / bare:.1f}x `python -c pass`",
        )
    for mode in MODES:
        row(
            f"`workspace_snap` after {CHANGED_FILES} changed files, {MODE_LABEL[mode]} (ms)",
            med(runs, mode, "snap", "mcp"),
            "ms",
            "`till --json snap`",
            med(runs, mode, "snap", "cli"),
            SNAP_WATCHED_TARGET if mode == "watch" else SNAP_ALONE_TARGET,
            note="until durable (+ sync)",
        )
    cold = med(runs, "cold", "cold")
    repaid = []
    for mode in MODES:
        saved = med(runs, mode, "snapshots", "cli") - med(runs, mode, "snapshots", "mcp")
        repaid.append(f"{cold / saved:.0f} ({MODE_LABEL[mode]})" if saved > 0 else "never")
    row(
        "`till mcp` cold start to first `tools/list` (ms)",
        cold,
        "ms",
        "`python -c pass`",
        med(runs, "cold", "bare"),
        COLD_START_TARGET_S * 1000,
        target_kind="value",
        note="repaid after " + " / ".join(repaid) + " `workspace_snapshots` calls",
    )
    row(
        "`till mcp` resident memory after the calls (MiB)",
        memory["server_rss_mib"],
        "MiB",
        "the watcher daemon" if memory["watcher_rss_mib"] else "",
        memory["watcher_rss_mib"],
        note=f"{memory['server_rss_start_mib']:.1f} MiB before the calls, peak "
        f"{memory['server_hwm_mib']:.1f}, after {memory['server_calls']} calls",
    )
    row("`python -c pass` (ms)", bare, "ms", note="the floor of any Python process")
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """Renders table_rows() as Markdown."""
    out = [
        "| measure | tillage | baseline | baseline value | ratio | target | result | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        scale = 1000 if r["unit"] == "ms" else 1
        value = _num(r["value"] * scale, r["unit"])
        base = "" if r["baseline_value"] is None else _num(r["baseline_value"] * scale, r["unit"])
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}x"
        target = ""
        if r["target"] is not None:
            target = (
                f"<= {r['target']}x"
                if r["target_kind"] == "ratio"
                else f"<= {r['target']:.0f} {r['unit']}"
            )
        out.append(
            f"| {r['measure']} | {value} | {r['baseline']} | {base} | {ratio} | {target} "
            f"| {r['verdict']} | {r['note']} |"
        )
    return "\n".join(out)


def _num(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
    return f"{value:.1f}"


def report(results: dict[str, Any]) -> str:
    """The human report: facts, then the Markdown table."""
    machine, stats = results["machine"], results["workload"]
    measured = (
        "the hooks only"
        if results.get("hooks_only")
        else f"medians of {results['repeat']} repeats of {results['calls']} round trips, "
        f"{results['snaps']} snaps and {results['cold']} cold starts a side"
    )
    out = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']}, "
        f"{machine['python']}, {machine['platform']}, scratch dir on {machine['workdir_fs']}, "
        f"load {machine['load_before']:.2f} at start",
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB "
        f"(seed {stats['seed']}, scale {stats['scale']}); {measured}",
    ]
    if results.get("hooks"):
        hooks = results["hooks"]
        shown = "; ".join(f"{e}: `{c}`" for e, c in hooks["commands"].items())
        out.append(f"Hooks: {hooks['rounds']} sessions a mode, each run as installed: {shown}")
    if stats["scale"] != 1.0:
        out.append("NOTE: scale != 1.0 — a smoke run, not comparable with the targets.")
    if machine["load_before"] > BUSY_LOAD:
        out.append(
            f"WARNING: load average was {machine['load_before']:.2f} at the start: something "
            "else was using the CPU (paired, alternated runs share the drift)."
        )
    out += ["", markdown(results["rows"])]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repeats (median reported)")
    parser.add_argument("--calls", type=int, default=50, help="round trips a side per repeat")
    parser.add_argument("--snaps", type=int, default=10, help="snaps a side per repeat and mode")
    parser.add_argument("--cold", type=int, default=5, help="cold starts per repeat")
    parser.add_argument(
        "--initialize", type=int, default=10, help="cold starts timed to `initialize`"
    )
    parser.add_argument(
        "--hook-rounds", type=int, default=20, help="hook sessions per mode (0: no hook part)"
    )
    parser.add_argument("--hooks-only", action="store_true", help="measure the hooks alone")
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workload (smoke runs)")
    parser.add_argument(
        "--workdir", type=Path, help="parent of the scratch dir (default: temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    parser.add_argument("--fail-on-target", action="store_true", help="exit 3 on a MISS")
    args = parser.parse_args(argv)
    if min(args.repeat, args.calls, args.snaps, args.cold, args.initialize) < 1:
        parser.error("--repeat, --calls, --snaps, --cold and --initialize must be >= 1")
    if args.hook_rounds < 0 or (args.hooks_only and args.hook_rounds < 1):
        parser.error("--hook-rounds must be >= 0 (>= 1 with --hooks-only)")
    return args


def bench_error(exc: BaseException) -> BenchError | None:
    """The BenchError in `exc`, also when the MCP client's task group wrapped it."""
    if isinstance(exc, BenchError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = bench_error(inner)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark: 1 when a step failed, 3 (with --fail-on-target) on a missed target."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)
    Tillage.check_available()  # also compiles tillage's bytecode, as an install would

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tillage-agents-", dir=args.workdir)).resolve()
    log(f"scratch dir: {workdir}")
    try:
        results = benchmark(args, workdir, log)
    except Exception as exc:
        failure = bench_error(exc)
        if failure is None:
            raise
        log(f"FAILED: {failure}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(report(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.fail_on_target and any(r["verdict"] == "MISS" for r in results["rows"]):
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
