"""Hook latency (issue 23): Claude Code's hooks as Claude Code runs them, timed per event.

`till hook install` writes the hook commands into the workspace's `.claude/settings.json` (or
`settings.local.json`); each is run here exactly as Claude Code runs it: `/bin/sh -c COMMAND`,
in the workspace, with `CLAUDE_PROJECT_DIR` set and the event's JSON payload on stdin (the
fields of Claude Code's hooks reference: the common `session_id`, `transcript_path`, `cwd`,
`permission_mode`, `hook_event_name`, and each event's own). A round is one whole session: its
prompt (UserPromptSubmit), an Edit of one source file and its PostToolUse, the turn's Stop and
the session's SessionEnd (a hook the install did not write is left out). Three modes:

- `watch`: the workspace's watcher running (the hook goes through its socket);
- `alone`: no watcher (`till watch --stop`): the whole command line seals in the hook's process;
- `hung`: the watcher running but stopped with SIGSTOP, as a hung watcher looks to a client.

Every hook must exit 0 and print nothing to stdout. After the hung rounds the watcher is
continued and must not seal anything the hooks asked of it late: every session of those rounds
holds exactly the snapshots its hooks sealed while it was stopped, before and after. Figures
are medians, 95th percentiles and maxima of wall time per event, over all rounds of a mode.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from measure import BenchError, tail

EVENTS = ("UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")
MODES = ("watch", "alone", "hung")
MODE_LABEL = {"watch": "watcher running", "alone": "no watcher", "hung": "watcher SIGSTOPped"}
SETTINGS = (".claude/settings.json", ".claude/settings.local.json")

# Targets (issue 23, item 11).
WATCHED_MEDIAN_TARGET_MS = 150.0  # each event's median with the watcher running
HUNG_WORST_TARGET_MS = 1000.0  # the slowest hook of all while the watcher is stopped


def payload(ws: Path, event: str, session: str, edited: Path) -> dict[str, Any]:
    """Claude Code's stdin document for `event` (hooks reference, "Hook input")."""
    common = {
        "session_id": session,
        "transcript_path": f"/tmp/claude/projects/bench/{session}.jsonl",
        "cwd": str(ws),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    if event == "UserPromptSubmit":
        return {**common, "prompt": "Fix the failing test in the parser, then run the suite."}
    if event == "PostToolUse":
        return {
            **common,
            "tool_name": "Edit",
            "tool_input": {
                "file_path": str(edited),
                "old_string": "# old line",
                "new_string": "# new line",
                "replace_all": False,
            },
            "tool_response": {"filePath": str(edited), "success": True},
            "tool_use_id": "toolu_01BenchHookLatency",
        }
    if event == "Stop":
        return {**common, "stop_hook_active": False}
    return {**common, "reason": "other"}  # SessionEnd


def installed_commands(ws: Path) -> dict[str, str]:
    """The command tillage installed for each Claude Code event, from both settings files."""
    found: dict[str, str] = {}
    for name in SETTINGS:
        path = ws / name
        if not path.exists():
            continue
        hooks = json.loads(path.read_text()).get("hooks", {})
        for event, groups in hooks.items():
            for group in groups:
                for hook in group.get("hooks", []):
                    command = hook.get("command", "")
                    if " hook " in command and event in EVENTS:
                        found[event] = command
    return found


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of `values`."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered), math.ceil(fraction * len(ordered))) - 1)
    return ordered[rank]


class HookRunner:
    """Runs the installed hooks of one workspace as Claude Code does, timing each."""

    def __init__(self, bench: Any, commands: dict[str, str]) -> None:
        self.bench = bench
        self.commands = commands
        self.sessions = 0

    def run(self, event: str, doc: dict[str, Any]) -> float:
        env = {**self.bench.env(), "CLAUDE_PROJECT_DIR": str(self.bench.ws)}
        started = time.perf_counter()
        proc = subprocess.run(
            ["/bin/sh", "-c", self.commands[event]],
            cwd=self.bench.ws,
            env=env,
            input=json.dumps(doc),
            capture_output=True,
            text=True,
            timeout=120,
        )
        seconds = time.perf_counter() - started
        if proc.returncode != 0 or proc.stdout:
            raise BenchError(
                f"the {event} hook exited {proc.returncode} (must be 0, stdout empty)\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return seconds

    def session(self, mode: str, samples: dict[str, list[float]]) -> str:
        """One whole session of hooks; returns its ID."""
        self.sessions += 1
        session = f"bench-{mode}-{self.sessions:04d}-{os.getpid()}"
        edited = self.bench.ws / "agents-bench-edited.txt"
        for event in EVENTS:
            if event not in self.commands:
                continue
            if event == "PostToolUse":
                edited.write_text(f"edited by session {session}\n")  # the Edit the hook follows
            doc = payload(self.bench.ws, event, session, edited)
            samples[event].append(self.run(event, doc))
        return session


def session_snapshots(bench: Any, session: str) -> list[str]:
    _proc, doc = bench.till("timeline", "--session", session, "-n", "1000")
    return [s["id"] for s in doc["snapshots"]]


def measure(bench: Any, rounds: int, log: Any) -> dict[str, Any]:
    """Every mode's rounds (the watcher is left running, as it was found)."""
    bench.till("hook", "install")
    commands = installed_commands(bench.ws)
    missing = [e for e in ("UserPromptSubmit", "PostToolUse", "Stop") if e not in commands]
    if missing:
        raise BenchError(f"`till hook install` wrote no hook for {missing}: {commands}")
    runner = HookRunner(bench, commands)
    results: dict[str, Any] = {"commands": commands, "rounds": rounds}
    for mode in MODES:
        samples: dict[str, list[float]] = {e: [] for e in commands}
        if mode == "alone":
            bench.stop_watcher()
        elif bench.watcher_pid() is None:
            bench.start_watcher()
        if mode == "hung":
            results["hung_sessions"] = _hung_rounds(bench, runner, rounds, samples)
        else:
            for _ in range(rounds):
                runner.session(mode, samples)
        results[mode] = {
            event: {
                "median": statistics.median(values),
                "p95": percentile(values, 0.95),
                "max": max(values),
                "samples": values,
            }
            for event, values in samples.items()
        }
        log(
            f"hooks, {MODE_LABEL[mode]}: "
            + ", ".join(
                f"{e} {results[mode][e]['median'] * 1000:.0f} ms "
                f"(p95 {results[mode][e]['p95'] * 1000:.0f})"
                for e in results[mode]
            )
        )
    return results


def _hung_rounds(
    bench: Any, runner: HookRunner, rounds: int, samples: dict[str, list[float]]
) -> dict[str, Any]:
    """The rounds with the watcher stopped; then it is continued, and must add nothing."""
    pid = bench.watcher_pid()
    if pid is None:
        raise BenchError("no watcher to stop")
    sessions = []
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(rounds):
            sessions.append(runner.session("hung", samples))
    finally:
        os.kill(pid, signal.SIGCONT)
    sealed = {s: session_snapshots(bench, s) for s in sessions}
    time.sleep(2.0)  # the continued watcher reads what was left on its socket
    bench.till("status")
    later = {s: session_snapshots(bench, s) for s in sessions}
    for s in sessions:
        if len(sealed[s]) < 2:
            raise BenchError(f"session {s}: its hooks sealed {len(sealed[s])} snapshots")
        if later[s] != sealed[s]:
            raise BenchError(
                f"session {s}: the continued watcher sealed {len(later[s]) - len(sealed[s])} "
                "snapshots the hooks had asked of it"
            )
    return {"sessions": len(sessions), "snapshots": sum(len(v) for v in sealed.values())}


def _row(label: str, seconds: float, target_ms: float | None, note: str) -> dict[str, Any]:
    """A row of agents.py's table (its keys); the target is in ms, the value in seconds."""
    verdict = "" if target_ms is None else "PASS" if seconds * 1000 <= target_ms else "MISS"
    return {
        "measure": label,
        "value": seconds,
        "unit": "ms",
        "baseline": "",
        "baseline_value": None,
        "ratio": None,
        "target": target_ms,
        "target_kind": "value",
        "verdict": verdict,
        "note": note,
    }


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The hook rows of the table: each event's median per mode, then the slowest hung hook."""
    out = []
    for mode in MODES:
        target = WATCHED_MEDIAN_TARGET_MS if mode == "watch" else None
        for event, figures in results[mode].items():
            note = (
                f"p95 {figures['p95'] * 1000:.0f} ms, max {figures['max'] * 1000:.0f} ms, "
                f"{len(figures['samples'])} hooks"
            )
            out.append(
                _row(f"`{event}` hook, {MODE_LABEL[mode]} (ms)", figures["median"], target, note)
            )
    worst = max(f["max"] for f in results["hung"].values())
    hung = results["hung_sessions"]
    out.append(
        _row(
            "slowest hook, watcher SIGSTOPped (ms)",
            worst,
            HUNG_WORST_TARGET_MS,
            f"{hung['sessions']} sessions, {hung['snapshots']} snapshots sealed; the continued "
            "watcher sealed none late",
        )
    )
    return out
