"""Memory stays bounded whatever the file size: seal and rewind a 1 GiB file, report peak RSS.

    python bench/bigfile.py [--gib 1]

Prints the wall time and peak RSS (ru_maxrss of the `till` process) of `till watch
--no-daemon` on a folder holding one file of half random, half zero bytes, and of a rewind
of that file after it was deleted. The target is a peak RSS under 150 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MIB = 150


def measured(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Runs `cmd`; returns (wall seconds, peak RSS MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.decode()}")
    return wall, usage.ru_maxrss / 1024, out.decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args(argv)
    till = [sys.executable, "-m", "tillage", "--json"]
    with tempfile.TemporaryDirectory(prefix="tillage-bigfile-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["TILLAGE_HOME"] = str(Path(tmp) / "store")
        folder = Path(tmp) / "ws"
        folder.mkdir()
        half = 1 << 19
        with open(folder / "big.bin", "wb") as f:
            for _ in range(int(args.gib * 1024)):
                f.write(os.urandom(half) + bytes(half))
        seal_s, seal_rss, out = measured([*till, "watch", "--no-daemon"], env, folder)
        head = json.loads(out)["head"]["id"]
        (folder / "big.bin").unlink()
        rewind_s, rewind_rss, _ = measured([*till, "rewind", head, "--yes"], env, folder)
    size = f"{args.gib:g} GiB"
    print("| step | wall s | peak RSS MiB |")
    print("|---|---|---|")
    print(f"| seal a {size} file | {seal_s:.2f} | {seal_rss:.0f} |")
    print(f"| rewind it | {rewind_s:.2f} | {rewind_rss:.0f} |")
    worst = max(seal_rss, rewind_rss)
    verdict = "PASS" if worst < TARGET_MIB else "FAIL"
    print(f"\npeak RSS {worst:.0f} MiB, target < {TARGET_MIB} MiB: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
