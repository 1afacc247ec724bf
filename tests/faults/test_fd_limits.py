"""A store of many packs and a tree of many folders fit a small limit on open files.

A watcher seals every few seconds (one pack per seal) and node_modules has thousands of
folders; a process may still be limited to 1024 open files, or fewer.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import Till
from tillage import call

FD_LIMIT = 128


def _limited(till: Till, *args: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "tillage", "--json", *args],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )


def test_a_wiped_tree_of_many_folders_from_many_packs_rewinds_under_a_small_fd_limit(
    till: Till, folder: Path
) -> None:
    call("workspace.watch", home=till.home, folder=folder, no_daemon=True)
    for n in range(3 * FD_LIMIT):  # one seal, one pack, one folder each
        (folder / f"d{n}" / "e").mkdir(parents=True)
        (folder / f"d{n}" / "e" / "f.txt").write_text(f"{n}\n")
        if n % 2 == 0:
            call("timeline.snap", home=till.home, folder=folder)
    full = call("timeline.snap", home=till.home, folder=folder).snapshot.id
    assert len(list((till.home / "packs").iterdir())) > FD_LIMIT
    for n in range(3 * FD_LIMIT):
        shutil.rmtree(folder / f"d{n}")

    rewound = _limited(till, "rewind", full, "--yes")
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert (folder / "d300" / "e" / "f.txt").read_text() == "300\n"
    assert len([p for p in folder.iterdir() if p.name.startswith("d")]) == 3 * FD_LIMIT

    verified = _limited(till, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    sealed = _limited(till, "snap")
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr


def test_library_calls_leave_no_pack_open_once_their_store_is_gone(
    till: Till, folder: Path
) -> None:
    import gc

    call("workspace.watch", home=till.home, folder=folder, no_daemon=True)
    for n in range(20):
        (folder / f"f{n}.txt").write_text(f"{n}\n")
        call("timeline.snap", home=till.home, folder=folder)  # each reads packs to dedup
    gc.collect()
    packs_dir = str(till.home / "packs")
    still_open = [
        target
        for fd in os.listdir("/proc/self/fd")
        if (target := _target(f"/proc/self/fd/{fd}")).startswith(packs_dir)
    ]
    assert still_open == []


def _target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return ""


def test_a_wiped_tree_of_many_large_files_in_many_folders_rewinds_under_a_small_fd_limit(
    till: Till, folder: Path
) -> None:
    """Large files are written in the pool while the plan goes on, each group through copies
    of its folders' fds: those copies count against the limit too."""
    call("workspace.watch", home=till.home, folder=folder, no_daemon=True)
    size = (1 << 20) + 16  # over the size the plan's own thread writes
    for n in range(FD_LIMIT // 2):
        (folder / f"d{n}").mkdir()
        (folder / f"d{n}" / "big.bin").write_bytes(b"%05d" % n * (size // 5) + b"x" * (size % 5))
    full = call("timeline.snap", home=till.home, folder=folder).snapshot.id
    for n in range(FD_LIMIT // 2):
        shutil.rmtree(folder / f"d{n}")

    rewound = _limited(till, "rewind", full, "--yes")
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    for n in range(FD_LIMIT // 2):
        data = (folder / f"d{n}" / "big.bin").read_bytes()
        assert data == b"%05d" % n * (size // 5) + b"x" * (size % 5)
