"""A pull decides and lands under one lock: an edit made while it decided is never written
over (the pull says diverged and the edit stays), and a pull that landed names its undo."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till
from tillage.platform import failpoints


def two_machines(tmp_path: Path, till: Till, folder: Path) -> tuple[Till, Path, Path]:
    """A pushes a small workspace, B clones it, A pushes a second state. Returns (B, B's
    folder, the remote)."""
    b = Till(tmp_path / "home-b", till.user_home, tmp_path)
    remote = tmp_path / "remote"
    (folder / "notes.txt").write_text("one\n")
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("print('a')\n")
    till.json("watch", "--no-daemon")
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push")
    b.json("clone", str(remote), "b", "--key", key, cwd=tmp_path)
    (folder / "notes.txt").write_text("two, from a\n")
    (folder / "src" / "app.py").write_text("print('b')\n")
    till.json("sync", "--push")
    return b, tmp_path / "b", remote


def test_an_edit_made_while_the_pull_decided_is_kept_and_the_pull_says_diverged(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    b, copy, _remote = two_machines(tmp_path, till, folder)

    def agent_edits() -> None:  # an agent writes between the pull's decision and its landing
        (copy / "notes.txt").write_text("edited on b while the pull ran\n")
        (copy / "fresh.txt").write_text("new on b\n")

    with failpoints.armed("sync.pull.decided", agent_edits):
        run = b("--json", "sync", "--pull", cwd=copy)
    assert run.code == 3, run.stdout
    assert run.doc["disposition"] == "diverged"
    assert (copy / "notes.txt").read_text() == "edited on b while the pull ran\n"
    assert (copy / "fresh.txt").read_text() == "new on b\n"
    assert (copy / "src" / "app.py").read_text() == "print('a')\n"  # nothing was landed
    assert "till merge --snapshot" in run.doc["next"]

    # The merge it names lands both sides (the file both changed: B's edit, as asked).
    merge = ("merge", "--snapshot", run.doc["remote_snapshot"], "--take", "ours", "notes.txt")
    merged = b.json(*merge, cwd=copy)
    assert merged["landed"] is True
    assert (copy / "notes.txt").read_text() == "edited on b while the pull ran\n"
    assert (copy / "src" / "app.py").read_text() == "print('b')\n"
    assert (copy / "fresh.txt").read_text() == "new on b\n"


def test_an_edit_made_while_the_pull_waited_for_the_folder_is_kept(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    b, copy, _remote = two_machines(tmp_path, till, folder)

    def agent_edits() -> None:  # after the download, before the pull holds the folder
        (copy / "src" / "app.py").write_text("print('edited on b')\n")

    with failpoints.armed("sync.pull.fetched", agent_edits):
        run = b("--json", "sync", "--pull", cwd=copy)
    assert run.code == 3 and run.doc["disposition"] == "diverged", run.stdout
    assert (copy / "src" / "app.py").read_text() == "print('edited on b')\n"
    assert (copy / "notes.txt").read_text() == "one\n"


def test_a_pull_that_landed_names_its_undo_and_the_undo_brings_the_folder_back(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    b, copy, _remote = two_machines(tmp_path, till, folder)
    pulled = b.json("sync", "--pull", cwd=copy)
    assert pulled["disposition"] == "fast_forwarded"
    assert (copy / "notes.txt").read_text() == "two, from a\n"
    assert "rescued" not in pulled and "rescue" not in pulled
    back = b.json("rewind", pulled["undo"], "--yes", cwd=copy)
    assert back["applied"] is True
    assert (copy / "notes.txt").read_text() == "one\n"
    assert (copy / "src" / "app.py").read_text() == "print('a')\n"


def test_a_file_rewritten_while_the_pull_writes_is_rescued_and_named(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    b, copy, _remote = two_machines(tmp_path, till, folder)

    def agent_edits() -> None:  # after the intent: the landing itself is racing the agent
        (copy / "notes.txt").write_text("edited on b during the landing, longer\n")

    with failpoints.armed("rewind.after_intent", agent_edits):
        pulled = b.json("sync", "--pull", cwd=copy)
    assert pulled["disposition"] == "fast_forwarded"
    assert pulled["rescued"] == ["notes.txt"]
    kept = b("cat", pulled["rescue"], "notes.txt", cwd=copy)
    assert kept.stdout == "edited on b during the landing, longer\n"
