"""Paths that try to leave the workspace (INV-7): refused, or never followed out of the root."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till
from tests.faults.harness import manifest, write_state

ESCAPES = ("../x", "/etc/passwd", "sub/../../x", "./../x", "sub/../..", ".tillage/workspace.json")


def test_a_rewind_of_a_path_outside_the_workspace_is_refused_and_changes_nothing(
    till: Till, folder: Path
) -> None:
    write_state(folder, {"sub/f.txt": b"one\n", "top.txt": b"top\n"})
    target = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, {"sub/f.txt": b"two\n", "other.txt": b"other\n"})
    before = manifest(folder)
    pointer = (folder / ".tillage" / "workspace.json").read_bytes()
    outside = folder.parent / "x"
    outside.write_bytes(b"not the workspace's\n")

    for escape in ESCAPES:
        run = till("--json", "rewind", target, "--paths", escape, "--yes")
        assert run.code == 1, (escape, run)
        assert run.error["code"] == -32066, (escape, run.error)
        assert manifest(folder) == before
        assert outside.read_bytes() == b"not the workspace's\n"
        assert (folder / ".tillage" / "workspace.json").read_bytes() == pointer
    assert till.json("status")["snapshots"] == 1


def test_a_rewind_never_writes_through_a_symlinked_parent(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    write_state(folder, {"sub/f.txt": b"snapshot\n", "top.txt": b"top\n"})
    target = till.json("watch", "--no-daemon")["head"]["id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_bytes(b"outside\n")
    (elsewhere / "keep.txt").write_bytes(b"keep\n")
    outside_before = manifest(elsewhere)
    write_state(folder, {"sub": ("link", str(elsewhere)), "top.txt": b"top\n"})

    run = till("--json", "rewind", target, "--paths", "sub/f.txt", "--yes")

    assert manifest(elsewhere) == outside_before
    assert "Traceback" not in run.stderr
    if run.code == 0:
        assert not (folder / "sub").is_symlink()
        assert (folder / "sub" / "f.txt").read_bytes() == b"snapshot\n"
        assert os.listdir(folder / "sub") == ["f.txt"]
    else:
        assert run.code == 1
        assert run.error["code"] in (-32066, -32062)
        assert (folder / "sub").is_symlink()
    till.json("status")
    assert manifest(elsewhere) == outside_before


def test_a_whole_rewind_replaces_a_symlinked_folder_without_touching_its_target(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    write_state(folder, {"sub/f.txt": b"snapshot\n", "sub/deeper/g.txt": b"g\n"})
    state = manifest(folder)
    target = till.json("watch", "--no-daemon")["head"]["id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_bytes(b"outside\n")
    outside_before = manifest(elsewhere)
    write_state(folder, {"sub": ("link", str(elsewhere))})

    till.json("rewind", target, "--yes")

    assert manifest(elsewhere) == outside_before
    assert manifest(folder) == state
