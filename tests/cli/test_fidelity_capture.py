"""Through the real `till`: hard links, sparse files and trees deeper than PATH_MAX seal as an
exact snapshot, and `diff` against the live folder sees no change until one is made."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till

DEPTH = 30
LONG = 200


def _deep_bottom(folder: Path, *, create: bool) -> int:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(DEPTH):
        name = f"{i:02d}" + "d" * (LONG - 2)
        if create:
            os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    return fd


def _write(dir_fd: int, name: str, data: bytes) -> None:
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        os.write(out, data)
    finally:
        os.close(out)


def test_links_sparse_files_and_deep_trees_seal_exact_and_diff_clean(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("one inode, two names\n")
    os.link(folder / "a.txt", folder / "b.txt")
    with open(folder / "disk.img", "wb") as f:
        f.truncate(512 << 20)
        f.seek(100 << 20)
        f.write(b"data in the middle")
    fd = _deep_bottom(folder, create=True)
    try:
        _write(fd, "deep.txt", b"v1\n")
    finally:
        os.close(fd)

    head = till.json("watch", "--no-daemon")["head"]

    assert head["grade"] == "exact"
    assert till.json("status", "--fidelity")["fidelity"] == []
    assert till.json("diff", head["id"])["changes"] == []
    store_bytes = sum(p.stat().st_size for p in (till.home / "packs").iterdir())
    assert store_bytes < 1 << 20  # the 512 MiB of zeros were neither read into nor kept

    fd = _deep_bottom(folder, create=False)
    try:
        _write(fd, "deep.txt", b"v2, longer\n")
    finally:
        os.close(fd)
    changes = till.json("diff", head["id"])["changes"]
    assert [(c["path"].rsplit("/", 1)[-1], c["kind"]) for c in changes] == [
        ("deep.txt", "modified")
    ]
