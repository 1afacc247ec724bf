"""A sparse file costs a fork and a merge check what it holds, not what it says: fork a folder
holding a 1 GiB disk image with 1 MiB of data, then merge the fork back with a `--check`
(which runs in a scratch copy of the whole folder), and report each one's wall time and what
the image costs on disk in the copy.

    python bench/sparse.py [--gib 1] [--repeat 3]

`cp -a` of the same folder is timed beside them (it keeps holes too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA_PIECES = 16  # 64 KiB each, spread evenly: 1 MiB of data


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return wall, done.stdout


def _image(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        for i in range(DATA_PIECES):
            f.seek(i * (size // DATA_PIECES))
            f.write(os.urandom(64 << 10))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    till = [sys.executable, "-m", "tillage", "--json"]
    size = int(args.gib * (1 << 30))
    rows: dict[str, list[tuple[float, int]]] = {"fork": [], "merge --check": [], "cp -a": []}
    with tempfile.TemporaryDirectory(prefix="tillage-sparse-", dir=os.getcwd()) as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["TILLAGE_HOME"] = str(Path(tmp) / "store")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        _image(ws / "disk.img", size)
        (ws / "notes.txt").write_text("base\n")
        source_kib = os.stat(ws / "disk.img").st_blocks // 2
        _timed([*till, "watch", "--no-daemon"], env, ws)
        for i in range(args.repeat):
            name = f"s{i}"
            wall, out = _timed([*till, "fork", name], env, ws)
            fork = Path(json.loads(out)["fork"]["path"])
            rows["fork"].append((wall, os.stat(fork / "disk.img").st_blocks // 2))
            (fork / "notes.txt").write_text(f"change {i}\n")
            check = "stat -c %b disk.img"
            wall, out = _timed([*till, "merge", name, "--check", check], env, ws)
            blocks = int(json.loads(out)["check_output"].split()[0])
            rows["merge --check"].append((wall, blocks // 2))
            copy = Path(tmp) / f"cp-{i}"
            wall, _ = _timed(["cp", "-a", str(ws), str(copy)], env, ws)
            rows["cp -a"].append((wall, os.stat(copy / "disk.img").st_blocks // 2))
    print(f"A {args.gib:g} GiB image holding {source_kib} KiB on disk; medians of {args.repeat}:\n")
    print("| step | wall s | image in the copy, KiB |")
    print("|---|---|---|")
    for step, got in rows.items():
        wall = statistics.median(w for w, _ in got)
        kib = statistics.median(k for _, k in got)
        print(f"| {step} | {wall:.2f} | {kib:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
