"""Through the real `till`: hard links, sparse files and trees deeper than PATH_MAX seal as an
exact snapshot, and `diff` against the live folder sees no change until one is made."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till
from tests.helpers import open_deep, write_at


def test_links_sparse_files_and_deep_trees_seal_exact_and_diff_clean(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("one inode, two names\n")
    os.link(folder / "a.txt", folder / "b.txt")
    with open(folder / "disk.img", "wb") as f:
        f.truncate(512 << 20)
        f.seek(100 << 20)
        f.write(b"data in the middle")
    fd = open_deep(folder, create=True)
    try:
        write_at(fd, "deep.txt", b"v1\n")
    finally:
        os.close(fd)

    head = till.json("watch", "--no-daemon")["head"]

    assert head["grade"] == "exact"
    assert till.json("status", "--fidelity")["fidelity"] == []
    assert till.json("diff", head["id"])["changes"] == []
    store_bytes = sum(p.stat().st_size for p in (till.home / "packs").iterdir())
    assert store_bytes < 1 << 20  # the 512 MiB of zeros were neither read into nor kept

    fd = open_deep(folder)
    try:
        write_at(fd, "deep.txt", b"v2, longer\n")
    finally:
        os.close(fd)
    changes = till.json("diff", head["id"])["changes"]
    assert [(c["path"].rsplit("/", 1)[-1], c["kind"]) for c in changes] == [
        ("deep.txt", "modified")
    ]
