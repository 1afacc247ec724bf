"""The watcher of a workspace ignores a workspace nested in it (workspace/nested.py): a folder
that holds its own `.tillage/` is not watched, whether it was one when watching began, became
one later (a `till watch` in it) or was moved in as one (a clone's last rename)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tillage.watch.inotify import FolderWatcher


class Seen:
    """The folders and names the watcher reported, as they come from its thread."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()

    def __call__(self, folder: str, name: str | None) -> None:
        with self.lock:
            self.changes.append((folder, name))

    def wait_for(self, change: tuple[str, str | None], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if change in self.changes:
                    return True
            time.sleep(0.02)
        return False

    def under(self, folder: str) -> list[tuple[str, str | None]]:
        with self.lock:
            return [c for c in self.changes if c[0] == folder or c[0].startswith(folder + "/")]


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, FolderWatcher, Seen]]:
    root = tmp_path / "outer"
    (root / "plain").mkdir(parents=True)
    (root / "inner" / ".tillage").mkdir(parents=True)  # nested from the start
    (root / "later").mkdir()
    cookies = tmp_path / "cookies"
    cookies.mkdir()
    seen = Seen()
    ignore = lambda *_: None  # noqa: E731
    watcher = FolderWatcher(
        root,
        skip_dirs=frozenset(),
        cookie_dir=cookies,
        on_change=seen,
        on_lost=ignore,
        on_degraded=ignore,
        on_cookie=ignore,
        on_batch=lambda: None,
    )
    watcher.start()
    try:
        yield root, watcher, seen
    finally:
        watcher.stop()


def test_a_nested_workspace_is_not_watched_from_the_outer_one(
    watched: tuple[Path, FolderWatcher, Seen],
) -> None:
    root, watcher, seen = watched
    assert watcher.watch_count() == 3  # the root, plain/ and later/: not inner/
    (root / "inner" / "x.txt").write_text("x")
    (root / "plain" / "p.txt").write_text("p")
    assert seen.wait_for(("plain", "p.txt"))
    assert seen.under("inner") == []

    (root / "later" / ".tillage").mkdir()  # it becomes a workspace of its own
    assert seen.wait_for(("", "later"))
    (root / "later" / "y.txt").write_text("y")
    (root / "plain" / "q.txt").write_text("q")
    assert seen.wait_for(("plain", "q.txt"))
    assert ("later", "y.txt") not in seen.under("later")
    assert watcher.watch_count() == 2

    clone = root.parent / "staged"
    (clone / ".tillage").mkdir(parents=True)
    (clone / "deep").mkdir()
    clone.rename(root / "cloned")  # moved in as a workspace: never watched
    assert seen.wait_for(("", "cloned"))
    (root / "cloned" / "deep" / "z.txt").write_text("z")
    (root / "plain" / "r.txt").write_text("r")
    assert seen.wait_for(("plain", "r.txt"))
    assert seen.under("cloned") == []
    assert watcher.watch_count() == 2
