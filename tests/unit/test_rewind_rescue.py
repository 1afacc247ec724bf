"""A file a concurrent writer changes while a rewind runs is rescued, never silently lost."""

from __future__ import annotations

from pathlib import Path

from tillage import call
from tillage.platform import failpoints


def test_a_file_changed_during_a_rewind_is_rescued_into_a_snapshot(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text(f"{name} v1\n")
    first = call("workspace.watch", home=home, folder=folder, no_daemon=True).head
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text(f"{name} v2\n")

    def concurrent_writer() -> None:
        (folder / "c.txt").write_text("c.txt written during the rewind\n")

    with failpoints.armed("rewind.after_first_action", concurrent_writer):
        result = call("workspace.rewind", home=home, folder=folder, id=first.id, yes=True)

    assert (folder / "c.txt").read_text() == "c.txt v1\n"
    assert result.rescued == ("c.txt",)
    assert result.rescue is not None
    rescued = call("timeline.cat", home=home, folder=folder, id=result.rescue, path="c.txt")

    assert rescued.content_base64.read() == b"c.txt written during the rewind\n"
    undo = call("timeline.cat", home=home, folder=folder, id=result.undo, path="c.txt")
    assert undo.content_base64.read() == b"c.txt v2\n"


def test_a_rewind_with_no_concurrent_writer_rescues_nothing(tmp_path: Path) -> None:
    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("v1\n")
    first = call("workspace.watch", home=home, folder=folder, no_daemon=True).head
    (folder / "a.txt").write_text("v2\n")
    result = call("workspace.rewind", home=home, folder=folder, id=first.id, yes=True)
    assert result.rescued == () and result.rescue is None


def test_a_rewind_that_fails_part_way_names_the_undo_and_leaves_no_intent(
    tmp_path: Path,
) -> None:
    from tillage.errors import TillageError

    home, folder = tmp_path / "store", tmp_path / "ws"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text("v1\n")
    first = call("workspace.watch", home=home, folder=folder, no_daemon=True).head
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text("v2\n")

    def refuse() -> None:
        raise PermissionError(13, "Permission denied", str(folder / "b.txt"))

    with failpoints.armed("rewind.after_first_action", refuse):
        try:
            call("workspace.rewind", home=home, folder=folder, id=first.id, yes=True)
        except TillageError as err:
            assert err.name == "workspace.rewind_stopped"
            undo = err.details["undo"]
        else:
            raise AssertionError("the rewind should have stopped")
    assert not list((home / "intents").iterdir())
    call("workspace.rewind", home=home, folder=folder, id=undo, yes=True)
    assert (folder / "a.txt").read_text() == "v2\n" and (folder / "b.txt").read_text() == "v2\n"
