"""The sync bench's follow lane: the time from a seal on machine A to the file on machine B
while `till sync --follow` runs on both (or, for a tillage without --follow, a push on A then a
pull on B), and what the followers' cycles did.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from measure import BenchError, run_measured, tail
from runners import Tillage
from sync_base import Log, base_env
from sync_lanes import Machine, TillLane

FOLLOW_READY_S = 180.0  # the first --follow cycle on both sides
STOP_TIMEOUT_S = 15.0
VISIBLE_POLL_S = 0.01


def has_follow() -> bool:
    """Whether this tillage's `sync` takes --follow (`till contracts`)."""
    with tempfile.TemporaryDirectory(prefix="tillage-bench-contracts-") as home:
        env = {**base_env(), "TILLAGE_HOME": home}
        proc = run_measured([*Tillage.command, "--json", "contracts"], cwd=Path(home), env=env)
    try:
        verbs = json.loads(proc.stdout)["verbs"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BenchError(f"`till contracts` answered {tail(proc.stdout)}") from exc
    for verb in verbs:
        if verb.get("command") == "sync":
            return any(p.get("name") == "follow" for p in verb.get("params", []))
    return False


@dataclass
class Follower:
    """One `till sync --follow` we started, its output in files."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def lines(self) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        for line in self.out.read_text(errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                docs.append({"unparsed": line[:200]})
                continue
            docs.append(doc if isinstance(doc, dict) else {"unparsed": line[:200]})
        return docs

    def stop(self) -> int | None:
        """Ctrl-C, then SIGTERM, then SIGKILL, each after a bounded wait; the exit status."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.wait()


def cycle_summary(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What one follower's cycles did: how many, their pulls, pushes, pauses and errors."""
    cycles = [doc for doc in lines if "cycle" in doc]
    pulled: dict[str, int] = {}
    for doc in cycles:
        key = str(doc.get("pulled"))
        pulled[key] = pulled.get(key, 0) + 1
    # Errors inside cycles, and anything else but the Ctrl-C that stopped it.
    errors = [doc for doc in cycles if doc.get("error")] + [
        doc
        for doc in lines
        if "cycle" not in doc and (doc.get("error") or {}).get("name") != "interrupted"
    ]
    # How long each kind of cycle took: from its start to the next one's, less the wait.
    took: dict[str, list[float]] = {"pushed": [], "fast_forwarded": [], "idle": []}
    for doc, after in itertools.pairwise(cycles):
        try:
            start = datetime.fromisoformat(doc["at"]).timestamp()
            end = datetime.fromisoformat(after["at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        kind = (
            "pushed"
            if doc.get("pushed")
            else "fast_forwarded"
            if doc.get("pulled") == "fast_forwarded"
            else "idle"
        )
        took[kind].append(end - start - float(doc.get("retry_in") or 0))
    return {
        "cycles": len(cycles),
        "cycle_seconds": took,
        "pulled": pulled,
        "pushed": sum(1 for doc in lines if doc.get("pushed")),
        "paused": sum(1 for doc in lines if doc.get("paused")),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def start_follow(m: Machine, env: dict[str, str], poll_s: float, out: Path) -> Follower:
    argv = [*Tillage.command, "--repo", str(m.ws), "--json", "sync", "--follow"]
    argv += ["--poll-seconds", f"{poll_s:g}"]
    full = {**base_env(), "TILLAGE_HOME": str(m.home), **env}
    err = out.with_suffix(".err")
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            argv, cwd=m.ws, env=full, stdin=subprocess.DEVNULL, stdout=o, stderr=e
        )
    return Follower(proc, out, err)


def wait_visible(path: Path, content: bytes, deadline: float, followers: list[Follower]) -> float:
    """Polls until `path` holds `content`; the perf_counter time it did. A follower that died
    or the deadline is a BenchError."""
    while True:
        try:
            if path.read_bytes() == content:
                return time.perf_counter()
        except OSError:
            pass
        if time.perf_counter() > deadline:
            raise BenchError(f"{path.name} was not visible on B in time")
        for f in followers:
            if f.proc.poll() is not None:
                raise BenchError(
                    f"`till sync --follow` exited {f.proc.returncode}: "
                    f"{tail(f.err.read_text(errors='replace'))}"
                )
        time.sleep(VISIBLE_POLL_S)


def follow_samples(
    lane: TillLane,
    args: argparse.Namespace,
    tag: str,
    follow: bool,
    log: Log,
) -> dict[str, Any]:
    """Seal-to-visible from A to B: under --follow on both sides, or (without --follow) by a
    push on A then a pull on B. Returns the samples and the followers' cycle counts."""
    runner = lane.runner
    env = lane.env(lane.ssh_log(f"follow-{tag}"))
    rng = random.Random(f"{args.seed}-{tag}-{lane.name}")
    samples: list[dict[str, float]] = []
    followers: list[Follower] = []
    out: dict[str, Any] = {"mode": "follow" if follow else "push-pull loop"}
    try:
        if follow:
            # Two machines poll out of step: B starts a random part of a poll after A.
            out["b_started_after_s"] = rng.uniform(0, args.poll_seconds)
            for side, m in (("a", lane.a), ("b", lane.b)):
                if side == "b":
                    time.sleep(out["b_started_after_s"])
                path = lane.logs / f"{lane.name}-follow-{tag}-{side}.jsonl"
                followers.append(start_follow(m, env, args.poll_seconds, path))
            deadline = time.perf_counter() + FOLLOW_READY_S
            while not all(f.out.stat().st_size for f in followers):
                if time.perf_counter() > deadline or any(
                    f.proc.poll() is not None for f in followers
                ):
                    raise BenchError(
                        "`till sync --follow` did not report a first cycle: "
                        + " | ".join(tail(f.err.read_text(errors="replace"), 5) for f in followers)
                    )
                time.sleep(0.05)
        for i in range(args.follow_samples):
            if follow:  # start anywhere in the poll cycle, not in step with it
                time.sleep(rng.uniform(0, args.poll_seconds))
            rel = f"sync-probe-{tag}-{i}.txt"
            content = f"{rng.getrandbits(256):064x}\n".encode()
            written = time.perf_counter()
            (lane.a.ws / rel).write_bytes(content)
            runner.procs = []
            lane.a.till(runner, ["snap"])
            sealed = time.perf_counter()
            snap_s = runner.procs[-1].seconds
            if follow:
                timeout = 60 + 10 * args.poll_seconds
                seen = wait_visible(lane.b.ws / rel, content, sealed + timeout, followers)
            else:
                lane.a.till(runner, ["sync", "--push"], env)
                lane.b.till(runner, ["sync", "--pull"], env)
                seen = time.perf_counter()
                if (lane.b.ws / rel).read_bytes() != content:
                    raise BenchError(f"{rel} is not on B after the push and the pull")
            samples.append(
                {
                    "seal_to_visible_s": seen - sealed,
                    "write_to_visible_s": seen - written,
                    "snap_s": snap_s,
                }
            )
        log(
            f"  {lane.name} {out['mode']}: seal-to-visible "
            + " ".join(f"{s['seal_to_visible_s']:.2f}" for s in samples)
        )
    finally:
        statuses = [f.stop() for f in followers]
    if followers:
        out["follow_exit"] = statuses
        out["followers"] = [cycle_summary(f.lines()) for f in followers]
    out["samples"] = samples
    return out
