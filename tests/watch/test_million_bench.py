"""bench/million.py still runs end to end on a tiny tree (300 files, 2 timed seals per width,
a 1 s idle window, tillage only): its table has every tillage and watcher row with a number,
says PASS or MISS for the watcher's targets (timings are never asserted here), and leaves no
watcher, no scratch dir and a kept tree byte-identical to what was built behind."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROWS = (
    "cold seal (s)",
    "delta seal, 1 file changed, no watcher (s)",
    "`till watch` start (s)",
    "delta seal, 1 file, watcher: p95 (s)",
    "delta seal, 100 files, watcher: p95 (s)",
    "`till status` with watcher (s)",
    "idle watcher RSS (MiB)",
)


def _digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under root, and every folder."""
    found: dict[str, str] = {}
    for dirpath, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in names:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


def _processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in argv:
                found.append(argv)
    return found


@pytest.mark.process
def test_the_million_file_benchmark_runs_on_a_tiny_tree(tmp_path: Path) -> None:
    if not Path("/proc/sys/fs/inotify/max_user_watches").exists():
        pytest.skip("needs Linux inotify")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    out, work, tree = tmp_path / "results.json", tmp_path / "work", tmp_path / "tree"
    script = str(REPO / "bench" / "million.py")
    small = ["--files", "300", "--runs", "2", "--idle-seconds", "1", "--tools", "tillage"]
    where = ["--workdir", str(work), "--tree", str(tree), "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, script, *small, *where],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    rows = {row["measure"]: row for row in results["table"]}
    for measure in ROWS:
        values = rows[measure]["values"]
        column = "tillage" if measure.startswith(("cold", "delta seal, 1 file changed")) else ""
        figure = values[column or "tillage+watch"]
        assert isinstance(figure, (int, float)) and figure >= 0, (measure, proc.stdout)
        assert f"| {measure} |" in proc.stdout
    for measure in (*ROWS[3:5], "idle watcher RSS (MiB)"):
        assert rows[measure]["verdict"] in ("PASS", "MISS"), rows[measure]
    assert results["tree"]["files"] == 300
    assert len(results["tools"]["tillage+watch"]["delta100"]) == 2
    assert os.listdir(work) == []
    assert _processes_naming(str(tree)) == []
    # The kept tree is pristine: a second build of the same seed is byte-identical to it.
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import million_tree
    finally:
        sys.path.remove(str(REPO / "bench"))
    million_tree.build(tmp_path / "again", 300, 0)
    assert _digest(tree) == _digest(tmp_path / "again")
