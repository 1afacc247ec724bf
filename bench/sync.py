"""Benchmark sync against rsync and restic: cold push, clone, the push and pull after the
standard mutate, requests per S3 push, and seal-to-visible under --follow, all in one run.

Issue 22: "Speed (measured in one run against rsync and restic, 250 MiB in 5,000 files) ...
Must show: in `bench/sync.py`, one run, the standard workload: cold push <= 1.5x rsync over SSH
and <= 1.0x restic on a folder and S3, clone <= 1.5x restic on S3, requests per cold push <= 1
per MiB sent." The standard workload (bench/workload.py at scale 1.0: 5,057 files, 244 MiB) is
that workload. Issue 12 set the first lanes (tillage and rsync, through a folder and over ssh).

Two "machines" are two TILLAGE_HOMEs (two stores) and two folders on this host. The bench
starts its own sshd on 127.0.0.1 (bench/sync_sshd.py: throwaway keys, the sftp subsystem on)
and its own moto S3 on 127.0.0.1 with a counting reverse proxy before it (bench/sync_s3.py,
bench/s3_proxy.py), both our children, stopped by their PIDs. Each repeat, every lane chosen
by --lanes (default: all eight, and follow) goes through four phases; bench/sync_lanes.py
says what each lane runs:

    transport  lanes (all reading one source folder per transport)
    dir        tillage-dir (a folder remote), rsync-local, restic-dir (a local repository)
    ssh        tillage-ssh (ssh://), rsync-ssh (-e SSH), restic-sftp (sftp: over our sshd)
    s3         tillage-s3 (s3://), restic-s3 (s3:http://...), both through the proxy

Phases: cold push (the whole folder to an empty remote; tillage's folder was sealed by `till
watch --no-daemon` and the remote added first, restic's repository made by `restic init`, each
timed apart), cold clone (into an empty folder; restic: `restore latest --target B`), then the
standard mutate (100 files edited, 10 added, 10 deleted, 4 MiB appended to the log) in every
source folder, the incremental push (restic: `backup` again) and the incremental pull (restic
has none comparable: a restore into the folder deletes nothing, so that cell is left out).
rsync runs with `-a --delete --exclude=/.tillage` (a mirror; --stats for its byte counts),
restic with `--exclude=SRC/.tillage`. In each phase the lanes run in an order rotated by the
repeat, each step after a `sync` and timed until durable (wall time of its processes plus the
`sync` after them, as bench/run.py). Every clone, restore and pull is checked file by file
(sha256, exec bit, symlinks, directories) against the source.

Bytes: tillage's own `uploaded_bytes` / `fetched_bytes` (sealed, compressed objects), rsync's
"Total bytes sent/received", what restic's repository grew by, for the ssh lanes the bytes on
the wire as the ssh client reports them (LogLevel=VERBOSE, -E a log per step), and for the S3
lanes the proxy's counts: requests by method and kind, request and answer body bytes. The
proxy's own overhead is measured once (the first repeat): the S3 lanes' cold push and clone
again straight to moto, right after the ones through it.

The new data the mutate made is measured from the folder before and after it: the whole
edited and added files plus the appended log bytes, the changed lines alone (difflib) plus the
added files and the append, and zstd -3 of the former, per file.

Follow (bench/sync_follow.py): after the pulls, on each tillage transport chosen, `till sync
--follow --poll-seconds P` runs on A and on B, and a fresh file sealed on A is timed until it
is in B's folder, --follow-samples times per transport and repeat.

Run ``python bench/sync.py``; see bench/README.md ("Sync").
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# Sibling modules: `python bench/sync.py` puts bench/ first on sys.path.
import workload
from measure import BenchError, ToolMissingError, machine_facts, manifest, tail
from runners import Tillage
from sync_base import EXCLUDED, MIB, Log, Runner, Step, base_env, check_same, timed
from sync_follow import follow_samples, has_follow
from sync_lanes import LANE_CLASSES, LANES, TRANSPORTS, Lane, LaneContext, ResticLane, TillLane
from sync_report import report
from sync_s3 import S3Site, start_s3
from sync_sshd import Sshd, start_sshd, this_till

# The files this bench runs (its commit is the last one that touched any of them).
BENCH_FILES = ("bench/sync*.py", "bench/s3_proxy.py", "bench/measure.py", "bench/workload.py")
GROUPS = {
    "all": (*LANES, "follow"),
    "dir": ("tillage-dir", "rsync-local", "restic-dir"),
    "ssh": ("tillage-ssh", "rsync-ssh", "restic-sftp"),
    "s3": ("tillage-s3", "restic-s3"),
    "tillage": ("tillage-dir", "tillage-ssh", "tillage-s3"),
    "rsync": ("rsync-local", "rsync-ssh"),
    "restic": ("restic-dir", "restic-sftp", "restic-s3"),
}


# -- the new data -------------------------------------------------------------------------------


def changed_line_bytes(old: bytes, new: bytes) -> int:
    """Bytes of the lines of `new` that are not in `old` (replaced or inserted), by difflib."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(
        sum(len(line) for line in b[j1:j2])
        for op, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if op in ("replace", "insert")
    )


def new_data(before: Path, after: Path, change: workload.Mutation) -> dict[str, int]:
    """What the mutate added, three ways (see the module docstring)."""
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3)
    edited_whole = edited_lines = added = packed = 0
    for rel in change.edited:
        new = (after / rel).read_bytes()
        edited_whole += len(new)
        edited_lines += changed_line_bytes((before / rel).read_bytes(), new)
        packed += len(compressor.compress(new))
    for rel in change.added:
        new = (after / rel).read_bytes()
        added += len(new)
        packed += len(compressor.compress(new))
    log = after / "logs" / "app.log"
    with open(log, "rb") as fh:
        fh.seek(log.stat().st_size - change.appended_bytes)
        packed += len(compressor.compress(fh.read()))
    appended = change.appended_bytes
    return {
        "edited": len(change.edited),
        "added": len(change.added),
        "deleted": len(change.deleted),
        "edited_whole_bytes": edited_whole,
        "edited_line_bytes": edited_lines,
        "added_bytes": added,
        "appended_bytes": appended,
        "files_bytes": edited_whole + added + appended,
        "lines_bytes": edited_lines + added + appended,
        "files_zstd3_bytes": packed,
    }


# -- one repeat ---------------------------------------------------------------------------------


def rotated(items: tuple[str, ...], by: int) -> list[str]:
    k = by % len(items)
    return [*items[k:], *items[:k]]


def one_repeat(
    args: argparse.Namespace,
    index: int,
    base: Path,
    expected_cold: dict[str, str],
    sshd: Sshd | None,
    s3: S3Site | None,
    root: Path,
    follow: bool,
    log: Log,
) -> dict[str, Any]:
    """Every chosen lane through every phase on fresh copies and empty remotes."""
    runner = Runner()
    logs = root / "logs"
    logs.mkdir(parents=True)
    ctx = LaneContext(index, logs, runner, sshd, s3)
    chosen: tuple[str, ...] = args.lanes
    sources: dict[str, Path] = {}
    for transport in dict.fromkeys(TRANSPORTS[name] for name in chosen):
        sources[transport] = root / f"src-{transport}"
        subprocess.run(["cp", "-a", str(base), str(sources[transport])], check=True)
    lanes: dict[str, Lane] = {
        name: LANE_CLASSES[name](name, root / name, sources[TRANSPORTS[name]], ctx)
        for name in chosen
    }
    order = rotated(chosen, index)
    steps: dict[str, dict[str, Step]] = {name: {} for name in chosen}
    for name in order:
        for label, act in lanes[name].setup_steps():
            steps[name][label] = timed(runner, act)

    def phase(label: str, act: Callable[[Lane], dict[str, Any]], names: list[str]) -> None:
        for name in names:
            steps[name][label] = timed(runner, lambda lane=lanes[name]: act(lane))
        log(f"  {label}: " + " ".join(f"{n}={steps[n][label].seconds:.2f}s" for n in names))

    phase("cold_push", lambda lane: lane.push("cold-push"), order)
    remote_bytes = {name: lane.remote_bytes() for name, lane in lanes.items()}
    checks: dict[str, dict[str, Any]] = {}
    s3_lanes = [n for n in order if TRANSPORTS[n] == "s3"]
    check_proxy = index == 0 and args.proxy_check and s3_lanes
    direct_lanes = [lane for n in s3_lanes if isinstance(lane := lanes[n], TillLane | ResticLane)]
    if check_proxy:
        for lane in direct_lanes:
            direct = timed(runner, lane.push_direct)
            checks[lane.name] = {"cold_push": proxy_check(steps[lane.name]["cold_push"], direct)}
    phase("clone", lambda lane: lane.clone(), order)
    for name, lane in lanes.items():
        check_same(expected_cold, lane.dest(), f"{name}: the clone")
    if check_proxy:
        for lane in direct_lanes:
            dest = lane.root / "b-direct"
            direct = timed(runner, partial(lane.clone_direct, dest))
            check_same(expected_cold, dest, f"{lane.name}: the clone straight from moto")
            checks[lane.name]["clone"] = proxy_check(steps[lane.name]["clone"], direct)
        shown = [
            f"{n}/{lb} {c['proxied_s']:.2f}s vs {c['direct_s']:.2f}s direct"
            for n, by in checks.items()
            for lb, c in by.items()
        ]
        log("  proxy check: " + " ".join(shown))
    changes = [workload.mutate(src, seed=args.seed + 1) for src in sources.values()]
    if any(change != changes[0] for change in changes):
        raise BenchError("the standard mutate changed the source folders differently")
    first = next(iter(sources.values()))
    added = new_data(base, first, changes[0])
    expected_after = manifest(first, EXCLUDED)
    for src in sources.values():
        check_same(expected_after, src, "the mutated source folders")
    phase("incr_push", lambda lane: lane.push("incr-push"), order)
    pulling = [name for name in order if lanes[name].pulls]
    phase("incr_pull", lambda lane: lane.pull("incr-pull") or {}, pulling)
    for name in pulling:
        check_same(expected_after, lanes[name].dest(), f"{name}: the incremental pull")
    follows: dict[str, Any] = {}
    if args.follow and args.follow_samples:
        for name in order:
            lane = lanes[name]
            if isinstance(lane, TillLane):
                follows[name] = follow_samples(lane, args, f"r{index}", follow, log)
    return {
        "lanes": list(order),
        "steps": {
            lane: {label: vars(step) for label, step in by_label.items()}
            for lane, by_label in steps.items()
        },
        "remote_bytes": remote_bytes,
        "new_data": added,
        "follow": follows,
        "proxy_check": checks,
    }


def proxy_check(proxied: Step, direct: Step) -> dict[str, Any]:
    """The same step through the proxy and straight to moto: both times and the requests."""
    return {
        "proxied_s": proxied.seconds,
        "direct_s": direct.seconds,
        "requests": proxied.facts.get("requests", {}).get("requests", 0),
        "direct": vars(direct),
    }


# -- main ---------------------------------------------------------------------------------------


def versions(at: str | None) -> dict[str, str]:
    def first_line(argv: list[str]) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return ((proc.stdout or proc.stderr).strip().splitlines() or ["unknown"])[0]

    def git(*argv: str) -> str:
        repo = Path(__file__).resolve().parent.parent
        proc = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
        return proc.stdout.strip()

    probe = subprocess.run(
        [*Tillage.command[:1], "-c", "import tillage; print(tillage.__file__)"],
        capture_output=True,
        text=True,
        env=base_env(),
        check=False,
    )
    source = str(Path(probe.stdout.strip()).parent.parent) if probe.returncode == 0 else "?"
    in_repo = source == str(Path(__file__).resolve().parent.parent / "src")
    changed = in_repo and git("status", "--porcelain", "src")
    dirty = " (its src/ has uncommitted changes, which ran)" if changed else ""
    return {
        "tillage": Tillage.version(),
        "commit": (git("log", "-1", "--format=%h", "--", *BENCH_FILES) or "unknown")
        + (" (modified)" if git("status", "--porcelain", "--", *BENCH_FILES) else "")
        + dirty,
        "tillage_commit": at or "the working tree",
        "tillage_source": source,
        "rsync": first_line(["rsync", "--version"]).replace("  ", " "),
        "ssh": first_line(["ssh", "-V"]),
        "restic": first_line(["restic", "version"]) if shutil.which("restic") else "no restic",
        "moto": first_line([sys.executable, "-c", "import moto; print(moto.__version__)"]),
    }


def benchmark(args: argparse.Namespace, scratch: Path, log: Log) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    follow = has_follow()
    if not follow:
        log("this tillage has no `till sync --follow`: measuring push on A then pull on B")
    base = scratch / "base"
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {base}")
    stats = workload.generate(base, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    expected = manifest(base, EXCLUDED)
    sshd: Sshd | None = None
    if any(TRANSPORTS[name] == "ssh" for name in args.lanes):
        far_till = args.remote_till or this_till()
        if args.at and not args.remote_till:  # sshd passes no environment: the commit's src
            far_till = shlex.join(
                ["/usr/bin/env", f"PYTHONPATH={os.environ['PYTHONPATH']}", far_till]
            )
        sshd = start_sshd(scratch / "sshd", far_till)
    repeats: list[dict[str, Any]] = []
    try:
        for i in range(args.repeat):
            log(f"repeat {i + 1}/{args.repeat} (load {os.getloadavg()[0]:.2f})")
            root = scratch / f"r{i}"
            s3 = None
            if any(TRANSPORTS[name] == "s3" for name in args.lanes):
                s3 = start_s3(scratch / f"s3-r{i}")  # a fresh moto: its objects are in memory
            try:
                repeats.append(one_repeat(args, i, base, expected, sshd, s3, root, follow, log))
            finally:
                if s3 is not None:
                    s3.stop()
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if sshd is not None:
            sshd.stop()
    machine = machine_facts(scratch, load_before)
    machine["load_after"] = os.getloadavg()[0]
    # A child's ru_maxrss starts at its parent's RSS at the fork (Linux keeps the higher of
    # the marks before and after exec): no peak below this one means anything.
    machine["bench_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results: dict[str, Any] = {
        "command": "python bench/sync.py " + shlex.join(sys.argv[1:]),
        "machine": machine,
        "versions": versions(args.at),
        "workload": {
            "files": stats.files,
            "bytes": stats.bytes,
            "seed": args.seed,
            "scale": args.scale,
        },
        "lanes": list(args.lanes) + (["follow"] if args.follow else []),
        "poll_seconds": args.poll_seconds,
        "follow_available": follow,
        "repeats": repeats,
    }
    results["table"] = report(results)
    return results


def parse_lanes(text: str) -> tuple[tuple[str, ...], bool]:
    """`--lanes`: lane names, groups (dir, ssh, s3, tillage, rsync, restic, all) and `follow`,
    comma-separated; the lanes in their standard order, and whether follow runs."""
    chosen: set[str] = set()
    for word in (w.strip() for w in text.split(",")):
        if word in GROUPS:
            chosen.update(GROUPS[word])
        elif word in LANES or word == "follow":
            chosen.add(word)
        else:
            raise ValueError(f"unknown lane {word!r}: choose from {', '.join([*GROUPS, *LANES])}")
    lanes = tuple(name for name in LANES if name in chosen)
    if not lanes:
        raise ValueError("--lanes chose no lane")
    return lanes, "follow" in chosen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repeats (medians reported)")
    parser.add_argument(
        "--lanes",
        default="all",
        help="comma-separated lanes ("
        + ", ".join(LANES)
        + "), groups ("
        + ", ".join(GROUPS)
        + ") and `follow` (the follow samples of the tillage lanes chosen); default all",
    )
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument(
        "--remote-till",
        help="tillage on the far side of ssh (default: the `till` beside this python)",
    )
    parser.add_argument(
        "--at",
        metavar="REV",
        help="run tillage as committed at REV (git archive of src/ on PYTHONPATH, both sides), "
        "not the working tree",
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed (mutate: seed+1)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workload (smoke runs)")
    parser.add_argument("--workdir", type=Path, help="parent of the scratch dir (default: temp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument(
        "--poll-seconds", type=float, default=1.0, help="--follow's poll interval (default 1)"
    )
    parser.add_argument(
        "--follow-samples",
        type=int,
        default=8,
        help="seal-to-visible samples per transport and repeat (default 8; 0 skips)",
    )
    parser.add_argument(
        "--no-proxy-check",
        dest="proxy_check",
        action="store_false",
        help="skip the S3 proxy's overhead check (the S3 cold push and clone straight to moto)",
    )
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.follow_samples < 0 or args.poll_seconds <= 0:
        parser.error("--repeat must be >= 1, --follow-samples >= 0, --poll-seconds > 0")
    try:
        args.lanes, args.follow = parse_lanes(args.lanes)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def use_commit(rev: str, dest: Path, log: Log) -> str:
    """Runs tillage as committed at `rev` (its src/ exported to `dest`, first on PYTHONPATH
    here and on the far side), not the working tree others may be editing. Returns the
    commit's short ID."""
    repo = Path(__file__).resolve().parent.parent
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise ToolMissingError(f"--at {rev}: not a commit of {repo}")
    commit = found.stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    src = str(dest / "src")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (src, os.environ.get("PYTHONPATH", "")) if p
    )
    log(f"tillage as committed at {commit}, from {src}")
    return commit


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark: 0 when everything ran and every copy was right, 1 otherwise."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tillage-sync-", dir=args.workdir)).resolve()
    log(f"scratch dir: {scratch}")
    try:
        if args.at:
            args.at = use_commit(args.at, scratch / "tillage-src", log)
        Tillage.check_available()  # also compiles tillage's bytecode, as an install would
        for tool in ("rsync", "restic"):
            if any(name.startswith(tool) for name in args.lanes) and not shutil.which(tool):
                raise ToolMissingError(f"{tool} is not installed (apt-get install {tool})")
        results = benchmark(args, scratch, log)
    except (BenchError, ToolMissingError) as exc:
        log(f"FAILED: {tail(str(exc), 40)}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(results["table"])
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
