"""What `till status` pays to describe the folder (verbs/folder.py), on its own and served.

For each size in `--files` (small files in folders of 100) it seals a workspace, starts its
watcher with a long debounce, edits one file, and measures the median of:

- `folder_info` in this process, asking the watcher over its socket (a local `till status`
  at a terminal), and with no watcher (the whole folder walked when it is small enough);
- the whole `till --json status` served by the watcher (the `tillage.cli` call the socket
  door makes), which is what an agent's `till status` costs beyond process start-up.

    python bench/status_folder.py [--files 1000,20000] [--runs 30]
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
from functools import partial
from pathlib import Path
from typing import Any


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f}"


def _describe(folder_info: Any, ws: Any) -> None:
    folder_info(ws, ws.store.head(ws.id))


def _time(fn: object, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", default="1000,20000")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    from tillage.verbs.folder import folder_info
    from tillage.workspace import watchstate
    from tillage.workspace.attach import require_workspace

    print(
        "| files | folder_info, watcher (ms) | folder_info, no watcher (ms) | served status (ms) |"
    )
    print("|---|---|---|---|")
    for files in (int(n) for n in args.files.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root, home = Path(tmp, "w"), Path(tmp, "store")
            for i in range(files):
                folder = root / f"d{i // 100}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"f{i}").write_text(str(i))
            env = {**os.environ, "TILLAGE_HOME": str(home)}
            till = [sys.executable, "-m", "tillage", "--json"]
            subprocess.run(
                [*till, "watch", "--no-daemon"],
                cwd=root,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            os.environ["TILLAGE_HOME"] = str(home)
            ws = require_workspace(home, root, Path.home())
            describe = partial(_describe, folder_info, ws)
            alone = _time(describe, args.runs)
            subprocess.run(
                [*till, "watch", "--debounce-ms", "600000"],
                cwd=root,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            try:
                (root / "d0" / "f0").write_text("edited")
                watched = _time(describe, args.runs)
                wid = json.loads((root / ".tillage" / "workspace.json").read_text())["workspace"]
                call = {"argv": ["--json", "status"], "cwd": str(root), "env": env}
                served = _time(
                    partial(watchstate.call, home, wid, "tillage.cli", call, 30), args.runs
                )
            finally:
                subprocess.run(
                    [*till, "watch", "--stop"], cwd=root, env=env, stdout=subprocess.DEVNULL
                )
            print(f"| {files:,} | {_ms(watched)} | {_ms(alone)} | {_ms(served)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
