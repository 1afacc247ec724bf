"""What a watcher buys a seal: the full walk against the delta walk, in one process.

Two identical copies of the standard workload (`workload.generate`, about 5,000 files) are
attached to two stores and sealed once. Then, for each run, the same edit is applied to both, and
copy A is sealed with a full walk (no watcher) while copy B is sealed through a ChangeLog fed
with the folders the edit touched, as the watcher would feed it. Both seals read the same changed
files and write the same objects; only the walk differs. Reported per edit: the median wall time
of each seal, and what each walk cost the file system (folders listed, names stat'ed, files
read).

Edits: `standard` is `workload.mutate` (100 edits, 10 adds, 10 deletes over the source tree,
4 MiB appended to the log); `ten-folders` rewrites 100 files in the 10 fullest folders; `none`
changes nothing (the seal a hook makes after a tool that wrote nothing, with skip_unchanged).

    python bench/delta_seal.py [--runs 5] [--scale 1.0] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import workload
from tillage.core.changes import ChangeLog
from tillage.workspace import watchstate
from tillage.workspace.attach import Workspace, attach
from tillage.workspace.capture import Capture
from tillage.workspace.seal import SealOptions, seal_result

Edit = Callable[[Path, int], list[str]]


def _parents(paths: list[str]) -> set[str]:
    return {p.rpartition("/")[0] for p in paths}


def edit_standard(root: Path, seed: int) -> list[str]:
    """The benchmark's standard mutate; returns the folders it touched."""
    done = workload.mutate(root, seed)
    return sorted(_parents(done.edited + done.added + done.deleted) | {"logs"})


def edit_ten_folders(root: Path, seed: int) -> list[str]:
    """Rewrites 10 files in each of the 10 fullest folders of the source tree."""
    rng = random.Random(seed)
    by_folder: dict[str, list[str]] = {}
    for rel in workload.source_files(root):
        by_folder.setdefault(rel.rpartition("/")[0], []).append(rel)
    # The ten fullest folders (ties broken by name), up to ten files in each.
    folders = sorted(sorted(by_folder), key=lambda f: -len(by_folder[f]))[:10]
    for folder in folders:
        for rel in rng.sample(by_folder[folder], min(10, len(by_folder[folder]))):
            path = root / rel
            path.write_text(path.read_text() + f"# edit {seed}\n")
    return sorted(folders)


def edit_none(root: Path, seed: int) -> list[str]:
    return []


EDITS: dict[str, Edit] = {
    "standard": edit_standard,
    "ten-folders": edit_ten_folders,
    "none": edit_none,
}


def _timed_seal(ws: Workspace) -> tuple[float, Capture, bool]:
    started = time.perf_counter()
    sealed = seal_result(ws, SealOptions(trigger="manual", skip_unchanged=True))
    return time.perf_counter() - started, sealed.capture, sealed.added


def run(runs: int, scale: float, workdir: Path) -> dict[str, object]:
    full_root, delta_root = workdir / "full" / "ws", workdir / "delta" / "ws"
    stats = workload.generate(full_root, seed=0, scale=scale)
    shutil.copytree(full_root, delta_root, symlinks=True)
    full = attach(workdir / "full" / "store", full_root, None).workspace
    delta = attach(workdir / "delta" / "store", delta_root, None).workspace
    log = ChangeLog("bench")
    watchstate.register_local(delta.id, log)
    seal_result(full, SealOptions(trigger="manual"))
    seal_result(delta, SealOptions(trigger="manual"))  # a full walk: it gets the first token
    report: dict[str, object] = {"files": stats.files, "bytes": stats.bytes, "runs": runs}
    seed = 100
    for name, edit in EDITS.items():
        rows: dict[str, list[tuple[float, Capture, bool]]] = {"full": [], "delta": []}
        for _ in range(runs):
            seed += 1
            edit(full_root, seed)
            for folder in edit(delta_root, seed):
                log.note(folder)
            # Alternate which copy goes first, so a warm cache favours neither.
            order = [("full", full), ("delta", delta)]
            for mode, ws in order if seed % 2 else order[::-1]:
                rows[mode].append(_timed_seal(ws))
        report[name] = {
            mode: {
                "median_ms": round(statistics.median(t for t, _, _ in done) * 1000, 1),
                "listed": done[-1][1].listed,
                "statted": done[-1][1].statted,
                "read_files": done[-1][1].read_files,
                "added": done[-1][2],
            }
            for mode, done in rows.items()
        }
    watchstate.register_local(delta.id, None)
    full.store.close()
    delta.store.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        report = run(args.runs, args.scale, Path(tmp))
    print(json.dumps(report, indent=2))
    print(f"\n{'edit':<12} {'mode':<6} {'median ms':>10} {'listed':>7} {'stat':>6} {'read':>5}")
    for name in EDITS:
        cell = report[name]
        assert isinstance(cell, dict)
        for mode, row in cell.items():
            print(
                f"{name:<12} {mode:<6} {row['median_ms']:>10} {row['listed']:>7} "
                f"{row['statted']:>6} {row['read_files']:>5}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
