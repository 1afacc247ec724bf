"""A `--paths` rewind reads only the scopes and the folders above them: with a watcher running,
its undo seal skips unchanged folders and reads back only the stored trees it needs. The folder
must end exactly as a rewind that read everything would leave it."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.faults.harness import Manifest, manifest
from tests.watch.conftest import WatchTill


def _tree(root: Path) -> None:
    for d in ("src/app", "src/lib/deep", "docs", "data"):
        (root / d).mkdir(parents=True)
    for n in range(6):
        (root / "src" / "app" / f"m{n}.py").write_text(f"module {n}\n")
        (root / "src" / "lib" / "deep" / f"d{n}.txt").write_text(f"deep {n}\n")
        (root / "docs" / f"page{n}.md").write_text(f"# page {n}\n")
    (root / "data" / "first").write_bytes(b"linked bytes\n")
    os.link(root / "data" / "first", root / "data" / "second")
    (root / ".env").write_text("KEY=1\n")


def _wreck(root: Path, rng: random.Random) -> None:
    (root / "src" / "app" / "m1.py").write_text("rewritten\n")
    (root / "src" / "app" / "m2.py").unlink()
    (root / "src" / "app" / "new.py").write_text("new\n")
    for path in rng.sample(sorted((root / "docs").iterdir()), 3):
        path.write_text("docs changed\n")
    for path in (root / "src" / "lib" / "deep").iterdir():
        path.unlink()
    (root / "src" / "lib" / "deep").rmdir()
    (root / "data" / "second").unlink()
    (root / ".env").write_text("KEY=wrong\n")


def _expected(before: Manifest, now: Manifest, scopes: list[str]) -> Manifest:
    def inside(path: str) -> bool:
        return any(path == s or path.startswith(s + "/") for s in scopes)

    out = {p: v for p, v in now.items() if not inside(p)}
    out.update({p: v for p, v in before.items() if inside(p)})
    for scope in scopes:  # the folders above a scope come back with it
        parts = scope.split("/")
        for n in range(1, len(parts)):
            above = "/".join(parts[:n])
            if above in before:
                out[above] = before[above]
    return out


@pytest.mark.parametrize(
    "scopes",
    [
        ["src/app/m1.py"],
        ["src/lib/deep"],
        ["src/app", ".env"],
        ["data/second"],
        ["docs/page1.md", "src/lib/deep/d3.txt"],
    ],
)
def test_a_paths_rewind_through_the_watcher_puts_back_exactly_its_scopes(
    wtill: WatchTill, folder: Path, scopes: list[str]
) -> None:
    _tree(folder)
    wtill.json("watch", "--debounce-ms", "600000")
    target = wtill.json("snap")["snapshot"]["id"]
    before = manifest(folder)
    _wreck(folder, random.Random(len(scopes)))
    wtill.json("snap")  # the watcher's token now names the wrecked view
    now = manifest(folder)

    done = wtill.json("rewind", target, "--paths", *scopes, "--yes")
    assert done["applied"] is True
    after = manifest(folder)
    expected = _expected(before, now, scopes)
    # A hard link's other name outside the scope comes back as a plain file (`unlinked`):
    # same bytes and mode, so the manifest cannot tell, and that is what it promises.
    assert after == expected
    wtill.json("rewind", done["undo"], "--yes")  # the undo seal holds the wrecked folder
    assert manifest(folder) == now
