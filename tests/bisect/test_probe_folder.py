"""`till bisect` runs every probe in one folder, made exactly the next probe's snapshot in place:
whatever the check did to it is put back, only what differs is written, and a killed bisect's
folder is still swept by the next one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.bisect.test_bisect import leftovers, running
from tests.conftest import Till

# The check: lists the folder it runs in (every name but `.tillage/`, with its kind, mode,
# bytes or target, and the mtime of what is not a folder) into OUT/<snapshot>.json, with
# whether a `.tillage/` is there and the inode and ctime of big.bin; then does to the folder
# what a build or a test may do, and passes or fails on state.txt.
CHECK = r"""
import json, os, stat, sys
from pathlib import Path

def listing(root):
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root and ".tillage" in dirnames:
            dirnames.remove(".tillage")
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                body = ["link", os.readlink(path), st.st_mtime_ns]
            elif stat.S_ISDIR(st.st_mode):
                body = ["dir"]
            elif stat.S_ISREG(st.st_mode):
                body = ["file", Path(path).read_bytes().hex(), st.st_nlink, st.st_mtime_ns]
            else:
                body = ["special"]  # never opened: a FIFO would block
            found[os.path.relpath(path, root)] = [mode, *body]
    return found

out = Path(sys.argv[1])
if sys.argv[2:] == ["list"]:
    print(json.dumps(listing(".")))
    sys.exit(0)
big = os.lstat("big.bin")
seen = {
    "files": listing("."),
    "control": os.path.lexists(".tillage"),
    "big": [big.st_ino, big.st_ctime_ns],
}
(out / (os.environ["TILLAGE_BISECT_SNAPSHOT"] + ".json")).write_text(json.dumps(seen))

readme = Path("README.md")
before = readme.stat()
readme.write_bytes(b"X" * before.st_size)  # same size and mtime: only its ctime tells
os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
Path("n.txt").unlink()
Path("made/deep").mkdir(parents=True)
Path("made/deep/x.txt").write_text("made by the check\n")
Path("build-output.o").write_bytes(b"\0" * 4096)
Path("run.sh").chmod(0o600)
Path("src").chmod(0o700)
Path("src/app.py").unlink()
Path("src/app.py").mkdir()  # a file replaced by a folder
Path(".tillage").mkdir()
Path(".tillage/stray").write_text("not a pointer\n")
os.link("run.sh", "a-link-to-run.sh")
sys.exit(0 if Path("state.txt").read_text() == "ok\n" else 1)
"""


def build(
    till: Till, folder: Path, states: list[str], out: Path
) -> tuple[list[str], list[dict[str, Any]]]:
    """A timeline with one snapshot per state, each differing in a few files (state.txt, n.txt,
    one file added and one dropped), a big file that never changes, a symlink, an executable
    and a read-only folder; returns the IDs and how the check (written into `out`, where it
    writes what it sees) lists each snapshot."""
    out.mkdir()
    (out / "check.py").write_text(CHECK)
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("def main():\n    return 42\n")
    (folder / "README.md").write_text("# demo\n")
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    (folder / "link").symlink_to("README.md")
    (folder / "big.bin").write_bytes(os.urandom(1 << 20))
    ro = folder / "ro"
    ro.mkdir()
    (ro / "kept.txt").write_text("read-only folder\n")
    ro.chmod(0o555)
    ids, listings = [], []
    for n, state in enumerate(states):
        (folder / "state.txt").write_text(state + "\n")
        (folder / "n.txt").write_text(f"{n}\n")
        (folder / "src" / f"step{n}.py").write_text(f"STEP = {n}\n")
        with contextlib.suppress(FileNotFoundError):
            (folder / "src" / f"step{n - 2}.py").unlink()
        if n == 0:
            ids.append(till.json("watch", "--no-daemon")["head"]["id"])
        else:
            ids.append(till.json("snap", "-m", f"state {n}")["snapshot"]["id"])
        listed = subprocess.run(
            [sys.executable, str(out / "check.py"), str(out), "list"],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        )
        listings.append(json.loads(listed.stdout))
    return ids, listings


def test_each_probe_sees_exactly_its_snapshot_after_the_last_check_changed_the_folder(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "seen"
    ids, listings = build(till, folder, ["ok"] * 5 + ["fail"] * 4, out)

    doc = till.json("bisect", "--", f"{sys.executable} {out / 'check.py'} {out}")

    assert doc["outcome"] == "found"
    assert (doc["first_bad"]["id"], doc["last_good"]["id"]) == (ids[5], ids[4])
    probed = [p["snapshot"]["id"] for p in doc["probes"]]
    assert len(probed) >= 4
    for snapshot in probed:
        seen = json.loads((out / f"{snapshot}.json").read_text())
        assert seen["files"] == listings[ids.index(snapshot)], snapshot
        assert seen["control"] is False  # the last check's .tillage/ is gone too
    # One folder for every probe, and the big file that no snapshot changed never rewritten.
    bigs = {tuple(json.loads((out / f"{s}.json").read_text())["big"]) for s in probed}
    assert len(bigs) == 1
    assert leftovers(till, folder) == []


@pytest.mark.parametrize(
    "after",
    [
        "mkfifo fifo",  # a name a walk cannot vouch for
        'cd .. && rm -rf "$OLDPWD"',  # the folder itself gone
        'cd .. && mv "$OLDPWD" elsewhere && mkdir "$OLDPWD" && touch "$OLDPWD/junk"',
    ],
    ids=["fifo", "removed", "replaced"],
)
def test_a_folder_the_check_made_unsure_is_written_afresh_for_the_next_probe(
    till: Till, folder: Path, tmp_path: Path, after: str
) -> None:
    out = tmp_path / "seen"
    ids, listings = build(till, folder, ["ok"] * 3 + ["fail"] * 3, out)
    check = f"{sys.executable} {out / 'check.py'} {out}; verdict=$?; {after}; exit $verdict"

    doc = till.json("bisect", "--", check)

    assert doc["outcome"] == "found"
    assert (doc["first_bad"]["id"], doc["last_good"]["id"]) == (ids[3], ids[2])
    for probe in doc["probes"]:
        snapshot = probe["snapshot"]["id"]
        seen = json.loads((out / f"{snapshot}.json").read_text())
        assert seen["files"] == listings[ids.index(snapshot)], snapshot
    assert leftovers(till, folder) == []


@pytest.mark.process
def test_a_killed_bisect_leaves_its_folder_to_the_next_one_which_removes_it(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "seen"
    ids, _listings = build(till, folder, ["ok", "ok", "ok", "fail"], out)
    started = tmp_path / "started"
    # The first probe runs the check; the second (in the same folder, made the bad end in
    # place) says where it runs and waits to be killed.
    check = (
        f'if [ -e "{out}/{ids[0]}.json" ]; then echo "$PWD $$" > "{started}.tmp"; '
        f'mv "{started}.tmp" "{started}"; exec sleep 60; fi; '
        f"{sys.executable} {out / 'check.py'} {out}"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "bisect", "--", check],
        cwd=folder,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    check_pid = 0
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second probe never started"
            time.sleep(0.02)
        probe_dir, pid = started.read_text().split()
        check_pid = int(pid)
        proc.kill()  # SIGKILL: nothing of till's own clean-up runs
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if check_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(check_pid, signal.SIGKILL)
    assert not running(check_pid)
    assert Path(probe_dir).is_dir()  # left behind by the killed bisect...

    doc = till.json("bisect", "--", f"{sys.executable} {out / 'check.py'} {out}")

    assert doc["first_bad"]["id"] == ids[3]
    assert not Path(probe_dir).exists()  # ...and removed by the next one
    assert leftovers(till, folder) == []
