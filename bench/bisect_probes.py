"""What one `till bisect` probe costs on the standard workload: the folder made the probe's
snapshot, before its check runs.

The standard workload (`workload.generate`, about 5,000 files and 250 MiB) is attached and
sealed, then changed by `workload.mutate` (100 source files edited, 10 added, 10 deleted, 4 MiB
appended to the log) and sealed again, --snapshots times in all; a state file in each says
whether the check passes (it fails from --breaks-at on). Each repeat then runs, for each build
(in a process of its own, the builds' order alternating from one repeat to the next), the
probes a bisect of that timeline runs (both ends, then core.bisect's choice, the check
`grep -qx ok bisect-state.txt`) through the bisect's own probe area, timing each probe whole
and the check alone: what is left is the probe's folder made its snapshot. It also times a
whole `till bisect --good FIRST --bad LAST -- CHECK` of that build as a process (start-up, the
probes, the clean-up). Medians over --repeat.

The first probe of a bisect writes its snapshot out whole; the later ones are the figure the
probe folder's reuse moves. To compare two builds on one workload, name their `src` folders:

    git archive OLD src | tar -x -C /tmp/old
    python bench/bisect_probes.py --repeat 3 --builds /tmp/old/src,src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import workload
from measure import machine_facts

CHECK = ("grep -qx ok bisect-state.txt",)


def _till(home: Path, cwd: Path, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    env["TILLAGE_HOME"] = str(home)
    if env.get("PYTHONPATH"):  # `PYTHONPATH=src` must not mean the workload's own src/
        parts = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in parts if p)
    done = subprocess.run(
        [sys.executable, "-m", "tillage", "--json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        said = (done.stdout + done.stderr)[-2000:]
        raise SystemExit(f"till {' '.join(args)} failed (exit {done.returncode}): {said}")
    return json.loads(done.stdout)


def build(ws: Path, home: Path, snapshots: int, breaks_at: int, scale: float) -> list[str]:
    """The workload and its timeline; returns the snapshot IDs, oldest first."""
    workload.generate(ws, seed=0, scale=scale)
    state = ws / "bisect-state.txt"
    ids = []
    for n in range(snapshots):
        if n:
            workload.mutate(ws, seed=n)
        state.write_text("ok\n" if n < breaks_at else "fail\n")
        if n == 0:
            ids.append(_till(home, ws, "watch", "--no-daemon")["head"]["id"])
        else:
            ids.append(_till(home, ws, "snap", "-m", f"bisect state {n}")["snapshot"]["id"])
    return ids


def probes(home: Path, ws: Path, good: str, bad: str) -> list[dict[str, Any]]:
    """One bisect's probes run in its probe area: each probe's snapshot, whole time and check
    time (seconds)."""
    from tillage.core.bisect import Search
    from tillage.features.bisect.bisect import first_parent_line, probe_area
    from tillage.workspace.attach import find_workspace

    found = find_workspace(home, ws)
    assert found is not None
    store = found.store
    bad_row = store.snapshot(bad)
    assert bad_row is not None
    line = first_parent_line(store, found.id, bad_row, good)
    timed: list[dict[str, Any]] = []
    with probe_area(store, ws.name) as run:

        def probe(position: int) -> Any:
            started = time.perf_counter()
            done = run(line[position], CHECK, None)
            whole = time.perf_counter() - started
            timed.append({"snapshot": line[position].id, "whole_s": whole, "check_s": done.seconds})
            return done.verdict

        probe(0)
        probe(len(line) - 1)
        search = Search.start(len(line))
        while (position := search.next_probe()) is not None:
            search = search.record(position, probe(position))
    return timed


def measure(home: Path, ws: Path, good: str, bad: str) -> dict[str, Any]:
    """One repeat of the build on the path: the probes in process, then `till bisect`."""
    os.sync()
    timed = probes(home, ws, good, bad)
    os.sync()
    started = time.perf_counter()
    doc = _till(home, ws, "bisect", "--good", good, "--bad", bad, "--", *CHECK)
    whole = time.perf_counter() - started
    prepare = [p["whole_s"] - p["check_s"] for p in timed]
    return {
        "probes": timed,
        "first_probe_s": prepare[0],
        "later_probes_s": prepare[1:],
        "later_probe_s": statistics.median(prepare[1:]),
        "bisect_s": whole,
        "bisect_probes": doc["probe_count"],
        "first_bad": (doc["first_bad"] or {}).get("id"),
    }


def _measure_build(src: Path, home: Path, ws: Path, good: str, bad: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    done = subprocess.run(
        [sys.executable, __file__, "measure", str(home), str(ws), good, bad],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {src} failed: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout))


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["measure"]:
        home, ws, good, bad = argv[1:]
        print(json.dumps(measure(Path(home), Path(ws), good, bad)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=10)
    parser.add_argument("--breaks-at", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--builds", default=None, help="src folders, comma-separated")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    import tillage

    here = Path(tillage.__file__).parent.parent
    builds = [Path(b) for b in args.builds.split(",")] if args.builds else [here]
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    scratch = Path(tempfile.mkdtemp(prefix="bisect-bench-", dir=args.workdir))
    try:
        ws, home = scratch / "ws", scratch / "store"
        ws.mkdir()
        log(f"workload sealed by the tillage in {here}; scratch {scratch}")
        ids = build(ws, home, args.snapshots, args.breaks_at, args.scale)
        head = _till(home, ws, "status")["head"]
        mib = head["bytes"] / 2**20
        log(f"{args.snapshots} snapshots of {head['files']:,} files, {mib:.0f} MiB")
        runs: dict[str, list[dict[str, Any]]] = {str(b): [] for b in builds}
        for n in range(args.repeat):
            order = builds if n % 2 == 0 else builds[::-1]
            for src in order:
                run = _measure_build(src, home, ws, ids[0], ids[-1])
                if run["first_bad"] != ids[args.breaks_at]:
                    raise SystemExit(f"{src}: bisect found {run['first_bad']}, not the break")
                runs[str(src)].append(run)
                log(
                    f"repeat {n + 1}, {src}: first probe {run['first_probe_s']:.2f} s, later "
                    + ", ".join(f"{p:.2f}" for p in run["later_probes_s"])
                    + f" s; till bisect {run['bisect_s']:.2f} s ({run['bisect_probes']} probes)"
                )
        keys = ("first_probe_s", "later_probe_s", "bisect_s")
        summary = {
            src: {key: statistics.median(r[key] for r in rs) for key in keys}
            for src, rs in runs.items()
        }
        count = next(iter(runs.values()))[0]["bisect_probes"]
        print(
            "| build | first probe: snapshot written whole (s) | each later probe (s) "
            f"| whole `till bisect`, {count} probes (s) |"
        )
        print("|---|---|---|---|")
        for src, figures in summary.items():
            print(
                f"| {src} | {figures['first_probe_s']:.3f} | {figures['later_probe_s']:.3f} "
                f"| {figures['bisect_s']:.2f} |"
            )
        if args.out is not None:
            args.out.write_text(
                json.dumps(
                    {
                        "machine": machine_facts(scratch),
                        "workload": {"files": head["files"], "bytes": head["bytes"]},
                        "summary": summary,
                        "runs": runs,
                    },
                    indent=2,
                )
            )
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
