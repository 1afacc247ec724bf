"""A workspace of another store attached inside this one is another workspace, known by its
`.tillage/` alone (workspace/nested.py): this workspace's seals, rewinds and forks leave it
alone. (A clone nested in a workspace of the same store: tests/sync/test_clone.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till


def test_a_workspace_of_another_store_inside_this_one_is_left_to_itself(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    (folder / "app").mkdir()
    (folder / "app" / "x.txt").write_text("x\n")
    inner = folder / "lib" / "inner"
    inner.mkdir(parents=True)
    (inner / "y.txt").write_text("y\n")
    till.json("watch", "--no-daemon")
    first = till.json("timeline")["snapshots"][0]["id"]
    assert first and till.json("snap")["snapshot"]["files"] == 2

    other = Till(tmp_path / "other-store", till.user_home, inner)
    other.json("watch", "--no-daemon")
    assert till.json("snap")["snapshot"]["files"] == 1  # app/x.txt alone
    (inner / "y.txt").write_text("edited in the inner workspace\n")
    (folder / "app" / "x.txt").write_text("edited\n")

    preview = till.json("rewind", first, "--dry-run")["changes"]
    assert [c["path"] for c in preview] == ["app/x.txt"]
    till.json("rewind", first, "--yes")
    assert (folder / "app" / "x.txt").read_text() == "x\n"
    assert (inner / "y.txt").read_text() == "edited in the inner workspace\n"
    assert other.json("status")["workspace"] == str(inner)

    till.json("fork", "k")
    fork = folder.parent / f"{folder.name}.forks" / "k"
    assert (fork / "app" / "x.txt").read_text() == "x\n"
    assert (fork / "lib").is_dir() and not (fork / "lib" / "inner").exists()
