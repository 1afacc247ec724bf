"""Mission Control's first paint and live updates (issue 25), in Debian's Chromium.

The scene: a workspace with 2,000 snapshots (`--snapshots`) and 5 forks (`--forks`), each
fork with a few seals of its own and one path colliding with the workspace. `till ui` serves
it as its own process; Playwright opens the page in a fresh browser context each run.

- first paint: from navigation start to the page's `tillage-ready` mark (app.js sets it once
  the universes, the collisions and the first page of the timeline are on screen), per run;
  the first run after the server starts is reported apart (`cold`: its first calls import the
  verbs). Chromium's own first-contentful-paint is shown beside it.
- live: from a `till snap` in a fork returning to the page showing that fork's new head.

Target: first paint ≤ 1,000 ms (median of the warm runs, and the cold one) with 5 forks and
2,000 snapshots. Run: `python bench/ui.py` (needs `apt-get install chromium` and
`pip install -e '.[dev]'`, which brings playwright); `--out FILE` writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import io
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

FIRST_PAINT_TARGET_MS = 1000.0
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


class Till:
    """`till` in this process (as the watcher serves a call): 2,000 seals in seconds, not the
    minutes 2,000 interpreter start-ups would take."""

    def __init__(self, home: Path) -> None:
        self.env = {**os.environ, "TILLAGE_HOME": str(home)}

    def __call__(self, cwd: Path, *args: str) -> Any:
        from tillage.hosts.cli.main import IO, run
        from tillage.store.store import closing_stores_opened_here

        out, err = io.BytesIO(), io.BytesIO()
        call = IO(cwd=str(cwd), env=self.env, stdin=b"", stdout=out, stderr=err)
        with closing_stores_opened_here():
            code = run(["--json", *args], call)
        if code != 0:
            raise RuntimeError(
                f"till {' '.join(args)}: {code} {out.getvalue()!r} {err.getvalue()!r}"
            )
        return json.loads(out.getvalue())


def build_scene(root: Path, snapshots: int, forks: int) -> tuple[Path, Till]:
    ws = root / "project"
    (ws / "src").mkdir(parents=True)
    for i in range(40):
        (ws / "src" / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 20)
    (ws / "shared.txt").write_text("base\n")
    till = Till(root / "store")
    till(ws, "watch", "--no-daemon")
    started = time.monotonic()
    for n in range(1, snapshots - 1):
        (ws / "src" / f"mod{n % 40}.py").write_text(f"VALUE = {n}\n" * 20)
        till(ws, "snap", "-m", f"edit {n}")
    for k in range(forks):
        till(ws, "fork", f"agent-{k}")
        fork = root / "project.forks" / f"agent-{k}"
        for s in range(3):
            (fork / f"agent-{k}-{s}.txt").write_text(f"work {s}\n")
            till(fork, "snap", "-m", f"agent {k} step {s}")
        (fork / "shared.txt").write_text(f"agent {k}\n")
        till(fork, "snap", "-m", f"agent {k} touches shared.txt")
    (ws / "shared.txt").write_text("the workspace's own\n")
    till(ws, "snap", "-m", "the workspace touches shared.txt")
    count = till(ws, "status")["snapshots"]
    print(
        f"scene: {count} snapshots, {forks} forks in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return ws, till


def start_ui(ws: Path, till: Till) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "ui"],
        cwd=ws,
        env=till.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def paint(browser: Any, url: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    page = context.new_page()
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        marks = page.evaluate(
            "() => ({ready: performance.getEntriesByName('tillage-ready')[0].startTime,"
            " fcp: (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime,"
            " rows: document.querySelectorAll('#timeline li').length,"
            " universes: document.querySelectorAll('#universes li').length})"
        )
        return {k: float(v) if v is not None else float("nan") for k, v in marks.items()}
    finally:
        context.close()


def live(browser: Any, url: str, ws: Path, till: Till, rounds: int) -> list[float]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    page = context.new_page()
    waits: list[float] = []
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        page.wait_for_selector("#live.on", timeout=60_000)
        fork = ws.parent / "project.forks" / "agent-0"
        for n in range(rounds):
            (fork / "live.txt").write_text(f"live {n}\n")
            head = till(fork, "snap", "-m", f"live {n}")["snapshot"]["id"][:12]
            sealed = time.monotonic()
            page.wait_for_selector(
                f'#universes li[data-name="agent-0"]:has-text("head {head}")', timeout=30_000
            )
            waits.append((time.monotonic() - sealed) * 1000)
    finally:
        context.close()
    return waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--forks", type=int, default=5)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--live-rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--scene", type=Path, help="build the scene here and keep it (reused when it exists)"
    )
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="tillage-bench-ui-") as scratch:
        where = args.scene or Path(scratch)
        if (where / "project").exists():
            ws, till = where / "project", Till(where / "store")
        else:
            ws, till = build_scene(where, args.snapshots, args.forks)
        proc, served = start_ui(ws, till)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS
                )
                cold = paint(browser, served["url"])
                warm = [paint(browser, served["url"]) for _ in range(args.runs)]
                waits = live(browser, served["url"], ws, till, args.live_rounds)
                browser.close()
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    ready = [w["ready"] for w in warm]
    figures = {
        "snapshots": args.snapshots,
        "forks": args.forks,
        "cold_first_paint_ms": cold["ready"],
        "first_paint_ms": {"median": statistics.median(ready), "max": max(ready), "runs": ready},
        "first_contentful_paint_ms": statistics.median(w["fcp"] for w in warm),
        "rows_painted": cold["rows"],
        "universes_painted": cold["universes"],
        "live_update_ms": {"median": statistics.median(waits), "max": max(waits), "runs": waits},
        "target_ms": FIRST_PAINT_TARGET_MS,
    }
    met = max(cold["ready"], figures["first_paint_ms"]["median"]) <= FIRST_PAINT_TARGET_MS
    print("| Mission Control | ms | target |")
    print("|---|---|---|")
    print(f"| first paint, cold server | {cold['ready']:.0f} | ≤ {FIRST_PAINT_TARGET_MS:.0f} |")
    print(
        f"| first paint, median of {args.runs} (max) | {statistics.median(ready):.0f} "
        f"({max(ready):.0f}) | ≤ {FIRST_PAINT_TARGET_MS:.0f} |"
    )
    fcp = figures["first_contentful_paint_ms"]
    print(f"| Chromium's first contentful paint (median) | {fcp:.0f} | — |")
    print(
        f"| a seal in a fork shown on the page, median of {len(waits)} (max) | "
        f"{statistics.median(waits):.0f} ({max(waits):.0f}) | ≤ 1000 |"
    )
    print(
        f"\n{cold['universes']:.0f} universes and {cold['rows']:.0f} timeline rows painted; "
        f"target {'met' if met else 'MISSED'}."
    )
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if met else 3


if __name__ == "__main__":
    raise SystemExit(main())
