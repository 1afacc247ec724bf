"""What `till snap` costs after one changed file, with the watcher running (issue 26).

Builds FILES small files in FOLDERS folders (two levels), attaches them with `till watch` (a
debounce of an hour, so the watcher never seals by itself), seals once more, then for each run
changes one file and times `till snap`. Reported per run and as medians: the wall time of the
`till snap` process, the bytes it wrote to disk (its rusage block output) and the watcher
daemon's, which serves the seal (its /proc write_bytes, and wchar: bytes passed to write
calls), and the growth of the store's files.

    PYTHONPATH=SRC python bench/watched_seal.py [--files 200000] [--folders 25000] [--runs 5]
        [--workdir DIR]

SRC is the tillage source tree to measure (the daemon inherits PYTHONPATH).
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


def build(root: Path, files: int, folders: int) -> None:
    top = max(1, int(folders**0.5))
    per = max(1, files // folders)
    for n in range(folders):
        sub = root / f"t{n % top:03d}" / f"s{n:05d}"
        sub.mkdir(parents=True, exist_ok=True)
        for f in range(per):
            (sub / f"f{f:02d}.txt").write_text(f"file {n}.{f}\n")


def till(env: dict[str, str], *args: str) -> tuple[float, int, str]:
    """Runs `till ARGS`; returns its wall time, the bytes it wrote to disk, and its stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", *args], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"till {' '.join(args)} failed: {out}")
    return wall, usage.ru_oublock * 512, out


def daemon_pids(root: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"tillage" in b" ".join(cmd)
            and str(root).encode() in cmd
            and int(entry.name) != os.getpid()
        ):
            pids.append(int(entry.name))
    return pids


def written(pids: list[int], field: str = "write_bytes") -> int:
    """The processes' /proc io counter `field` (write_bytes: to disk; wchar: to write calls)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def store_size(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--folders", type=int, default=25_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.workdir, prefix="watched-seal-"))
    root, home = work / "ws", work / "store"
    build(root, args.files, args.folders)
    env = {**os.environ, "TILLAGE_HOME": str(home)}
    till(env, "--repo", str(root), "-q", "watch", "--debounce-ms", "3600000")
    till(env, "--repo", str(root), "-q", "snap")  # the first with the watcher's token
    pids = daemon_pids(root)
    runs = []
    try:
        for n in range(args.runs):
            target = next((root / f"t{n % 10:03d}").iterdir()) / "f00.txt"
            target.write_text(f"changed {n}\n")
            size, daemon, calls = store_size(home), written(pids), written(pids, "wchar")
            wall, wrote, _out = till(env, "--repo", str(root), "-q", "snap")
            runs.append(
                {
                    "wall_s": round(wall, 3),
                    "snap_write_bytes": wrote,
                    "daemon_write_bytes": written(pids) - daemon,
                    "daemon_wchar": written(pids, "wchar") - calls,
                    "store_growth_bytes": store_size(home) - size,
                }
            )
    finally:
        till(env, "--repo", str(root), "-q", "watch", "--stop")
        shutil.rmtree(work, ignore_errors=True)
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"daemons": len(pids), "runs": runs, "median": medians}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
