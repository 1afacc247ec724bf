"""Benchmark the remote's storage format: a cold push and a cold clone of ~250 MiB in 5,000
files through a folder remote, the median of N repeats, with the remote requests each made
(calls of the Remote seam, counted in the `till` process) and the objects the remote then
holds; `restic backup` / `restic restore` of the same folder to a folder repository beside it.

Run ``python bench/sync_packs.py [--src SRC] [--repeats 3] [--restic] [--s3]`` (`--s3`:
through moto on 127.0.0.1, started from tests/remote/s3_server.py, instead of a folder): SRC
is the tillage source tree to measure (default: this one), so the same script measures a tree
before a change and after it (``git archive main src | tar -x -C /tmp/old``, then
``--src /tmp/old/src``). Times are wall times of the `till` process, each step after an
``os.sync()`` and followed by one (timed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = 5_000
FOLDERS = 50
TOTAL = 250 << 20

# Runs `till ARGS...`, counting each Remote call of the directory transport; the counts go to
# the file named by TILLAGE_BENCH_COUNTS when the process ends.
COUNTING = """
import atexit, collections, json, os, sys
from tillage.remote import directory, s3
counts = collections.Counter()
for cls in (directory.DirectoryRemote, s3.S3Remote):
    for method in ("exists", "put", "get", "get_range", "list", "delete", "read_versioned",
                   "write_if"):
        plain = cls.__dict__.get(method)
        if plain is None:
            continue
        def counted(self, *args, _plain=plain, _m=method, **kwargs):
            counts[_m] += len(args[0]) if _m == "exists" else 1
            return _plain(self, *args, **kwargs)
        setattr(cls, method, counted)
atexit.register(lambda: open(os.environ["TILLAGE_BENCH_COUNTS"], "w").write(json.dumps(counts)))
from tillage.hosts.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def make_folder(root: Path) -> int:
    """5,000 files in 50 folders, sizes spread from 1 KiB to ~150 KiB, ~250 MiB in all:
    incompressible bytes (what compresses is the easy case)."""
    rng = random.Random(12)
    weights = [rng.random() ** 2 for _ in range(FILES)]
    scale = TOTAL / sum(weights)
    total = 0
    for i, w in enumerate(weights):
        folder = root / f"d{i % FOLDERS:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        size = max(1024, int(w * scale))
        (folder / f"f{i:04d}.bin").write_bytes(rng.randbytes(size))
        total += size
    return total


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    os.sync()
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    os.sync()
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stdout} {done.stderr}")
    return took, done.stdout


S3_ENV: dict[str, str] = {}  # the moto server's, with --s3


def till(src: str, home: Path, counts: Path) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    env.update(PYTHONPATH=src, TILLAGE_HOME=str(home), TILLAGE_BENCH_COUNTS=str(counts))
    env.update(S3_ENV)
    return [sys.executable, "-c", COUNTING], env


def objects_below(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")]
    return len(files), sum(p.stat().st_size for p in files)


def one_round(src: str, scratch: Path, data: Path, url: str | None) -> dict[str, object]:
    remote = scratch / "remote"
    target = url or str(remote)
    a_home, b_home = scratch / "a-home", scratch / "b-home"
    counts = scratch / "counts.json"
    base, env_a = till(src, a_home, counts)
    _, env_b = till(src, b_home, counts)
    subprocess.run(
        [*base, "watch", "--no-daemon"], env=env_a, cwd=data, check=True, capture_output=True
    )
    added = subprocess.run(
        [*base, "--json", "remote", "add", target],
        env=env_a,
        cwd=data,
        check=True,
        capture_output=True,
        text=True,
    )
    key = json.loads(added.stdout)["key"]
    push_s, out = timed([*base, "--json", "sync", "--push"], env_a, data)
    push_counts = json.loads(counts.read_text())
    pushed = json.loads(out)
    objects, stored = objects_below(remote) if url is None else (-1, -1)
    clone_s, _ = timed(
        [*base, "--json", "clone", target, str(scratch / "b"), "--key", key], env_b, scratch
    )
    clone_counts = json.loads(counts.read_text())
    return {
        "push_s": push_s,
        "clone_s": clone_s,
        "push_requests": sum(push_counts.values()),
        "push_calls": push_counts,
        "clone_requests": sum(clone_counts.values()),
        "clone_calls": clone_counts,
        "remote_objects": objects,
        "remote_bytes": stored,
        "uploaded_bytes": pushed["uploaded_bytes"],
    }


def restic_round(scratch: Path, data: Path, url: str | None) -> dict[str, float]:
    repo = str(scratch / "restic-repo")
    if url is not None:  # s3://bucket/prefix on the moto endpoint
        repo = f"s3:{S3_ENV['TILLAGE_S3_ENDPOINT']}/{url[5:]}-restic"
    env = {**os.environ, **S3_ENV, "RESTIC_PASSWORD": "bench", "RESTIC_REPOSITORY": repo}
    subprocess.run(["restic", "init"], env=env, check=True, capture_output=True)
    backup_s, _ = timed(["restic", "backup", "--quiet", str(data)], env, scratch)
    restore_s, _ = timed(
        ["restic", "restore", "latest", "--target", str(scratch / "r")], env, scratch
    )
    return {"backup_s": backup_s, "restore_s": restore_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "src"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--restic", action="store_true", help="also time restic")
    parser.add_argument("--s3", action="store_true", help="through moto on 127.0.0.1, not a folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="till-bench-packs-") as tmp:
        data = Path(tmp) / "data"
        size = make_folder(data)
        moto = None
        if args.s3:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.remote.s3_server import start_moto

            (Path(tmp) / "moto").mkdir()
            moto = start_moto(Path(tmp) / "moto")
            S3_ENV.update(moto.env())
        rounds, restic = [], []
        for i in range(args.repeats):
            scratch = Path(tmp) / f"round-{i}"
            scratch.mkdir()
            url = None
            if moto is not None:
                moto.create_bucket(f"bench-{i}")
                url = f"s3://bench-{i}/sync"
            rounds.append(one_round(args.src, scratch, data, url))
            if args.restic:
                restic.append(restic_round(scratch, data, url))
            shutil.rmtree(scratch)
            shutil.rmtree(data / ".tillage", ignore_errors=True)
        report: dict[str, object] = {
            "src": args.src,
            "files": FILES,
            "bytes": size,
            "push_s_median": statistics.median(r["push_s"] for r in rounds),  # type: ignore[misc]
            "clone_s_median": statistics.median(r["clone_s"] for r in rounds),  # type: ignore[misc]
            "last": rounds[-1],
        }
        if moto is not None:
            moto.stop()
        if restic:
            report["restic_backup_s_median"] = statistics.median(r["backup_s"] for r in restic)
            report["restic_restore_s_median"] = statistics.median(r["restore_s"] for r in restic)
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
