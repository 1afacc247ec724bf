"""Shared tools of the fault tests: folder states, manifests, crashing `till`, damaging a store."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tillage.core.paths import CONTROL_DIR
from tillage.store.packs import HEADER_SIZE, ScannedRecord, iter_packs, scan_pack
from tillage.store.publog import GENESIS, PublicationLog

# Runs the real command line with one failpoint armed: argv is NAME ACTION till-args...
CRASH_SCRIPT = (
    "import sys\n"
    "from tillage.platform import failpoints\n"
    "failpoints.arm(sys.argv[1], sys.argv[2])\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)

SEAL_FAILPOINTS = (
    "pack.after_write",
    "pack.after_fsync",
    "objects.after_pack_fsync",
    "seal.before_publish",
    "publog.before_append",
    "publog.before_fsync",
    "publish.after_log",
    "seal.after_publish",
)
# A crash at these points leaves the snapshot's log line written: it is published.
PUBLISHED_AT = frozenset({"publog.before_fsync", "publish.after_log", "seal.after_publish"})

REWIND_FAILPOINTS = (
    "rewind.after_intent",
    "rewind.after_first_action",
    "rewind.before_intent_removed",
)

TMP_MARK = ".tillage-tmp-"

# A folder state: path -> bytes (a file), ("dir",), ("link", target) or ("exec", bytes).
Spec = Mapping[str, Any]
# What a user sees of a folder: path -> (type, permission bits, bytes or link target).
Manifest = dict[str, tuple[str, int, bytes | None]]


def noise(seed: int, size: int) -> bytes:
    """Incompressible, reproducible bytes (a file larger than one chunk when size > 512 KiB)."""
    return random.Random(seed).randbytes(size)


def clear(root: Path) -> None:
    """Removes everything in the folder except tillage's own pointer."""
    for child in root.iterdir():
        if child.name == CONTROL_DIR:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def write_state(root: Path, spec: Spec) -> None:
    """Makes the folder hold exactly `spec` (besides `.tillage/`)."""
    clear(root)
    for path in sorted(spec):
        value = spec[path]
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, bytes):
            target.write_bytes(value)
            target.chmod(0o644)
        elif value[0] == "dir":
            target.mkdir(exist_ok=True)
        elif value[0] == "link":
            os.symlink(value[1], target)
        elif value[0] == "exec":
            target.write_bytes(value[1])
            target.chmod(0o755)
        else:
            raise ValueError(value)


def manifest(root: Path) -> Manifest:
    """Returns path -> (type, mode, content) for everything below `root` but `.tillage/`."""
    out: Manifest = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            rel_dir = ""
            if CONTROL_DIR in dirnames:
                dirnames.remove(CONTROL_DIR)
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(full)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.fsencode(os.readlink(full)))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, None)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, Path(full).read_bytes())
            else:
                out[rel] = ("special", mode, None)
    return out


def temp_leftovers(root: Path) -> list[str]:
    """Returns every path below `root` that is a rewind's temporary file."""
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs if TMP_MARK in n]


def crash(till: Till, failpoint: str, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `till ARGS` as a real process with `failpoint` armed to `action`."""
    return subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, failpoint, action, *args],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_crashed(proc: subprocess.CompletedProcess[str], failpoint: str, action: str) -> None:
    """Asserts the process really stopped at `failpoint` (so the test is not vacuous)."""
    if action == "kill":
        assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
        return
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "internal"
    assert f"FailpointCrashError: {failpoint}" in error["message"]


def snapshot_ids(till: Till) -> list[str]:
    """The workspace's snapshot IDs, newest first, as `till timeline` shows them."""
    return [s["id"] for s in till.json("timeline", "-n", "1000")["snapshots"]]


def rewind(till: Till, snapshot: str, *extra: str) -> dict[str, Any]:
    doc = till.json("rewind", snapshot, "--yes", *extra)
    assert doc["applied"] is True
    return dict(doc)


# -- the store's bytes -------------------------------------------------------------------------


def packs(home: Path) -> list[Path]:
    return list(iter_packs(home / "packs"))


def records(home: Path) -> list[ScannedRecord]:
    return [r for pack in packs(home) for r in scan_pack(pack).records]


def record_of(home: Path, object_id: bytes) -> ScannedRecord:
    found = [r for r in records(home) if r.id == object_id]
    assert found, f"no record holds {object_id.hex()}"
    return found[0]


def patch_file(path: Path, offset: int, data: bytes) -> None:
    """Overwrites bytes of a (possibly read-only) store file in place."""
    path.chmod(0o644)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "rb") as f:
        f.seek(offset)
        old = f.read(1)
    patch_file(path, offset, bytes([old[0] ^ 0x20]))


def flip_payload(home: Path, object_id: bytes) -> ScannedRecord:
    """Damages one byte inside the payload of the record that holds `object_id`."""
    rec = record_of(home, object_id)
    payload = rec.location.length - HEADER_SIZE - 4
    flip_byte(home / "packs" / rec.location.pack, rec.location.offset + HEADER_SIZE + payload // 2)
    return rec


def log_path(home: Path) -> Path:
    return home / "log" / "publication.log"


def log_records(home: Path) -> list[dict[str, Any]]:
    """Reads the whole publication log, asserting it is whole and its hash chain intact."""
    raw = log_path(home).read_bytes()
    assert raw.endswith(b"\n"), "the log ends in a torn line"
    found = [
        {"seq": r.seq, "kind": r.kind, "body": r.body}
        for r in PublicationLog(log_path(home)).read_from(0, GENESIS)
    ]
    assert len(found) == raw.count(b"\n")
    assert [r["seq"] for r in found] == list(range(1, len(found) + 1))
    return found


def logged_snapshots(home: Path) -> list[str]:
    return [r["body"]["id"] for r in log_records(home) if r["kind"] == "snapshot"]


def remove_index(home: Path) -> None:
    for path in home.glob("index.sqlite*"):
        path.unlink()


# -- folder states the tests move between ------------------------------------------------------

STATE_A: dict[str, Any] = {
    "README.md": b"hello\n",
    "src/app.py": b"print('a')\n",
    "src/lib/util.py": b"x = 1\n",
    "bin/run.sh": ("exec", b"#!/bin/sh\necho a\n"),
    "link": ("link", "src/app.py"),
    "big.bin": noise(1, 700 * 1024),
    "empty": ("dir",),
}

# A wreck of A: edits, deletions, additions, type changes both ways, a new link target, a mode.
STATE_B: dict[str, Any] = {
    "README.md/inside.txt": b"a folder where a file was\n",
    "src/app.py": b"print('b')\n" * 50,
    "bin/run.sh": b"#!/bin/sh\necho a\n",
    "link": ("link", "README.md"),
    "big.bin": noise(1, 300 * 1024) + b"EDIT" + noise(1, 700 * 1024)[300 * 1024 + 4 :],
    "empty": b"a file where a folder was\n",
    "new/deep/file.txt": b"new\n",
}

STATE_C: dict[str, Any] = {
    "README.md": b"third\n",
    "src/app.py": b"print('c')\n",
    "notes.txt": noise(3, 2000),
    "link": ("link", "notes.txt"),
}
