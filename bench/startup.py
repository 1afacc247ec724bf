"""Start-up cost of the `till` command: agents call it hundreds of times a session.

Measures the median wall time of whole processes of the `till` console script against
`python -c pass` as the floor, and says each as a ratio to it (the goal for `till status` with a
watcher running is <= 3x):

- `till --json contracts` and `version` (no store work),
- `till --json status` without a watcher (the whole command line in its own process),
- `till --json status` with a watcher running (the console script's socket door),
- `till --json snap` after 10 edits, without a watcher (a full walk) and through the watcher
  (a seal of what it saw change).

The workspace is `--files` small files in folders of 50. For the watcher rows it runs with a
long debounce, so it never seals the edits itself before the measured `snap` does. Bytecode is
compiled first and PYTHONDONTWRITEBYTECODE is cleared, as for an installed package. When the
watcher cannot start (no daemon built, no inotify), its rows say so and are skipped.

    python bench/startup.py [--runs 21] [--files 1000]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TARGET_STATUS_RATIO = 3.0


class Row:
    """One measured command: its samples, and what runs untimed before each."""

    def __init__(self, name: str, cmd: list[str], before: Callable[[], None] | None = None):
        self.name = name
        self.cmd = cmd
        self.before = before
        self.samples: list[float] = []

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def measure(rows: list[Row], env: dict[str, str], cwd: Path, runs: int) -> None:
    """Runs every row `runs` times (after one warm-up each), interleaved round by round, so a
    burst of load on the machine falls on all of them alike; stdin, stdout and stderr are not
    terminals, as when an agent runs `till`."""
    for n in range(runs + 1):
        for row in rows:
            if row.before is not None:
                row.before()
            start = time.perf_counter()
            subprocess.run(
                row.cmd,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
            if n:
                row.samples.append((time.perf_counter() - start) * 1000)


def _make_workspace(folder: Path, files: int) -> list[Path]:
    paths = []
    for i in range(files):
        path = folder / f"d{i // 50:03d}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"X = {i}\n")
        paths.append(path)
    return paths


class Edits:
    """Changes 10 files before each measured `snap`: a small edit, as an agent's turn makes."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.round = 0

    def __call__(self) -> None:
        self.round += 1
        step = max(1, len(self.paths) // 10)
        for path in self.paths[::step][:10]:
            path.write_text(f"X = {self.round}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args(argv)
    import tillage

    compileall.compile_dir(str(Path(tillage.__file__).parent), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = Path(sys.executable).with_name("till")
    till = [str(script)] if script.exists() else [sys.executable, "-m", "tillage"]
    floor_cmd = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory(prefix="tillage-startup-") as tmp:
        env["TILLAGE_HOME"] = str(Path(tmp) / "store")
        folder = Path(tmp) / "ws"
        folder.mkdir()
        edits = Edits(_make_workspace(folder, args.files))

        def run(*words: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*till, *words],
                env=env,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )

        if run("--json", "watch", "--no-daemon").returncode != 0:
            raise SystemExit("could not attach the benchmark workspace")
        snap = f"till --json snap after 10 edits ({args.files} files)"
        alone = [
            Row("python -c pass", floor_cmd),
            Row("till --json contracts", [*till, "--json", "contracts"]),
            Row("till --json version", [*till, "--json", "version"]),
            Row("till --json status, no watcher (local)", [*till, "--json", "status"]),
            Row(f"{snap}, no watcher (local)", [*till, "--json", "snap"], edits),
        ]
        measure(alone, env, folder, args.runs)
        started = run("--json", "watch", "--debounce-ms", "600000")
        watching = started.returncode == 0 and json.loads(started.stdout).get("watching") is True
        why = "" if watching else (started.stderr.strip().splitlines() or ["not watching"])[-1]
        watched = [
            Row("python -c pass", floor_cmd),
            Row("till --json status, watcher (socket)", [*till, "--json", "status"]),
            Row(f"{snap}, watcher (socket)", [*till, "--json", "snap"], edits),
        ]
        try:
            if watching:
                measure(watched, env, folder, args.runs)
        finally:
            if watching:
                run("watch", "--stop")
    print(f"| command | median ms ({args.runs} runs) | x `python -c pass` |")
    print("|---|---|---|")
    for group, ran in ((alone, True), (watched, watching)):
        floor = group[0].median if ran else alone[0].median
        for row in group:
            if not ran:
                if row is not group[0]:
                    print(f"| `{row.name}` | skipped: {why} | |")
            else:
                print(f"| `{row.name}` | {row.median:.1f} | {row.median / floor:.2f}x |")
    load = os.getloadavg()[0]
    if watching:
        ratio = watched[1].median / watched[0].median
        verdict = "PASS" if ratio <= TARGET_STATUS_RATIO else "FAIL"
        print(
            f"\n`till --json status` through the watcher: {watched[1].median:.1f} ms = "
            f"{ratio:.2f}x `python -c pass`, target <= {TARGET_STATUS_RATIO:.0f}x: {verdict} "
            f"(load average {load:.2f})"
        )
    else:
        print(f"\nno watcher rows: {why} (load average {load:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
