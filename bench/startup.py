"""Start-up cost of the `till` command: agents call it hundreds of times a session.

Measures the median wall time of whole processes (`till --json contracts`, `version`, and
`status`/`snap` on a small attached folder) against `python -c pass` as the floor. Bytecode is
compiled first and PYTHONDONTWRITEBYTECODE is cleared, as for an installed package.

    python bench/startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_CONTRACTS_MS = 80.0


def median_ms(cmd: list[str], env: dict[str, str], cwd: Path, runs: int) -> float:
    """Returns the median wall time of `runs` runs of `cmd`, after one warm-up run."""
    subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, check=False)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, check=False)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    import tillage

    compileall.compile_dir(str(Path(tillage.__file__).parent), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    till = [sys.executable, "-m", "tillage", "--json"]
    with tempfile.TemporaryDirectory(prefix="tillage-startup-") as tmp:
        env["TILLAGE_HOME"] = str(Path(tmp) / "store")
        folder = Path(tmp) / "ws"
        (folder / "src").mkdir(parents=True)
        for i in range(50):
            (folder / "src" / f"m{i}.py").write_text(f"X = {i}\n")
        subprocess.run(
            [*till, "watch", "--no-daemon"], env=env, cwd=folder, check=True, capture_output=True
        )
        rows = [
            ("python -c pass", median_ms([sys.executable, "-c", "pass"], env, folder, args.runs)),
            ("till --json contracts", median_ms([*till, "contracts"], env, folder, args.runs)),
            ("till --json version", median_ms([*till, "version"], env, folder, args.runs)),
            ("till --json status (50 files)", median_ms([*till, "status"], env, folder, args.runs)),
            ("till --json snap (50 files)", median_ms([*till, "snap"], env, folder, args.runs)),
        ]
    print(f"| command | median ms ({args.runs} runs) |")
    print("|---|---|")
    for name, ms in rows:
        print(f"| `{name}` | {ms:.1f} |")
    contracts = rows[1][1]
    verdict = "PASS" if contracts <= TARGET_CONTRACTS_MS else "FAIL"
    print(
        f"\n`till --json contracts` {contracts:.1f} ms, target <= {TARGET_CONTRACTS_MS:.0f} ms: "
        f"{verdict} (load average {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
