"""The watcher's warm-up: the head's trees in its cache before the first seal it is asked for.

`till watch` starts the watcher before it seals, so on a new folder the warm-up finds no head
yet: it waits for the first one (the first `till snap` after it had read every told folder's
tree from the store), and ends with the watcher.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tillage import call
from tillage.core.models import EntryKind
from tillage.hosts.daemon import main as daemon_main
from tillage.workspace import trees
from tillage.workspace.attach import attach, find_workspace


@pytest.fixture
def tree_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[trees.TreeCache]:
    """A tree cache of the test's own, on as in the watcher, in place of the process's."""
    cache = trees.TreeCache()
    cache.enabled = True
    monkeypatch.setattr(trees, "TREES", cache)
    monkeypatch.setattr(daemon_main, "FIRST_HEAD_POLL_S", 0.02)
    yield cache


def _warming_up(till: Till, folder: Path, stop: threading.Event) -> threading.Thread:
    """The warm-up, started on `folder` attached but with no snapshot yet (as `till watch`
    starts its watcher)."""
    attach(till.home, folder, till.user_home).workspace.store.close()
    warming = threading.Thread(
        target=daemon_main._warm_up,
        args=(till.home, folder, till.user_home, stop),
        daemon=True,
    )
    warming.start()
    return warming


def _every_tree(till: Till, folder: Path, cache: trees.TreeCache) -> set[bytes]:
    ws = find_workspace(till.home, folder)
    assert ws is not None
    try:
        head = ws.store.head(ws.id)
        assert head is not None
        found, stack = set(), [bytes.fromhex(head.tree)]
        while stack:
            tid = stack.pop()
            found.add(tid)
            entries = cache.get(tid)
            assert entries is not None, "a tree of the head is not in the cache"
            stack.extend(e.content for e in entries if e.kind is EntryKind.DIR)
        return found
    finally:
        ws.store.close()


def test_on_a_new_folder_the_warm_up_waits_for_the_first_seal_and_caches_its_trees(
    till: Till, folder: Path, tree_cache: trees.TreeCache
) -> None:
    for n in range(5):
        (folder / f"d{n}" / "e").mkdir(parents=True)
        (folder / f"d{n}" / "e" / "f.txt").write_text(f"{n}\n")
    stop = threading.Event()
    warming = _warming_up(till, folder, stop)
    try:
        time.sleep(0.3)  # the warm-up imports, finds no head, and waits
        assert warming.is_alive()
        call("timeline.snap", home=till.home, folder=folder)
        warming.join(30)
        assert not warming.is_alive(), "the warm-up did not see the first snapshot"
    finally:
        stop.set()
        warming.join(30)
    assert len(_every_tree(till, folder, tree_cache)) == 11  # the root, five d*, five d*/e


def _index_fds(home: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(home / "index.sqlite")):
                found.append(target)
    return found


def test_a_warm_up_waiting_for_a_first_seal_holds_no_store_open_and_ends_with_the_watcher(
    till: Till, folder: Path, tree_cache: trees.TreeCache
) -> None:
    """A connection held while `till watch` seals would keep that seal's index in the WAL
    file after the command exits, until the watcher closed it."""
    stop = threading.Event()
    warming = _warming_up(till, folder, stop)
    try:
        time.sleep(0.3)
        assert warming.is_alive()
        assert _index_fds(till.home) == []
    finally:
        stop.set()
        warming.join(5)
    assert not warming.is_alive()
