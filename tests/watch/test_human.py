"""What a person at a terminal reads about the watcher and hooks: sentences, not raw fields."""

from __future__ import annotations

from pathlib import Path

from tests.watch.conftest import WatchTill


def test_watch_status_stop_and_hooks_answer_people_in_sentences(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    started = wtill("watch")
    assert started.code == 0 and "Watching for changes" in started.stdout
    status = wtill("status")
    assert "Watcher    on (pid " in status.stdout
    assert "ms after the last change" in status.stdout

    (folder / "b.txt").write_text("b\n")
    sealed = wtill("hook", "post-tool", "--agent", "me")
    assert sealed.code == 0 and sealed.stdout.startswith("Sealed ")
    assert "hook post-tool agent=me" in sealed.stdout
    again = wtill("hook", "post-tool", "--agent", "me")
    assert again.stdout.startswith("Nothing changed since ") and "Note:" not in again.stdout

    stopped = wtill("watch", "--stop")
    assert stopped.code == 0 and stopped.stdout.startswith(f"Stopped the watcher of {folder}")
    assert "Sealed" not in stopped.stdout
    none = wtill("watch", "--stop")
    assert none.stdout.startswith(f"No watcher was running for {folder}")
    assert "Watcher    off" in wtill("status").stdout


def test_a_hook_in_a_folder_that_is_not_attached_says_so_and_exits_0(
    wtill: WatchTill, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = wtill("--repo", str(elsewhere), "hook", "turn-end")
    assert run.code == 0
    assert "is not attached" in run.stdout and "nothing was sealed" in run.stdout


def test_an_absurd_debounce_is_refused_before_anything_is_attached(
    wtill: WatchTill, folder: Path
) -> None:
    """A debounce beyond a day would never seal (and its timer overflows time_t, which
    killed the seal loop while status still said watching): refused, nothing attached."""
    for value in ("-1", "86400001", "99999999999999999999"):
        run = wtill("--json", "watch", "--debounce-ms", value)
        assert run.code == 1 and run.error["name"] == "invalid_argument", run
    assert not (folder / ".tillage").exists()
