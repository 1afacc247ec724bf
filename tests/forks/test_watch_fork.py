"""`till watch-fork NAME`: a fork's snapshots as they are sealed, one JSON line each, for a
parent following its children; `--once` and `--after`, its end when the fork is removed, and
the fork_snapshots tool a model calls instead of a stream."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tillage.agent
from tests.conftest import Till

SNAPSHOT_FIELDS = {
    "id",
    "short",
    "sealed_at",
    "trigger",
    "label",
    "grade",
    "pinned",
    "parent",
    "files",
    "bytes",
    "agent",
    "turn",
    "session",
    "merged_from",
}


def _fork(till: Till, name: str) -> tuple[Path, dict[str, Any]]:
    doc = till.json("fork", name)["fork"]
    return Path(doc["path"]), doc


def _snap(till: Till, where: Path, name: str, label: str) -> dict[str, Any]:
    (where / name).write_text(f"{label}\n")
    snapshot: dict[str, Any] = till.json("snap", "-m", label, cwd=where)["snapshot"]
    return snapshot


def _lines(till: Till, *args: str) -> list[dict[str, Any]]:
    run = till("--json", "watch-fork", *args)
    assert run.code == 0, (run.code, run.stdout, run.stderr)
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    (folder / "app.py").write_text("print('v1')\n")
    till.json("watch", "--no-daemon")
    return folder


def test_once_after_the_base_lists_the_forks_snapshots_oldest_first_with_its_name(
    till: Till, attached: Path
) -> None:
    path, fork = _fork(till, "alpha")
    one = _snap(till, path, "one.txt", "one")
    _snap(till, attached, "parent.txt", "in the parent")  # not the fork's: never a line
    two = _snap(till, path, "two.txt", "two")

    lines = _lines(till, "alpha", "--once", "--after", fork["base"])

    assert [s["id"] for s in lines] == [fork["head"], one["id"], two["id"]]
    for line in lines:
        assert set(line) == SNAPSHOT_FIELDS | {"fork"}
        assert line["fork"] == "alpha"
    assert {k: lines[1][k] for k in SNAPSHOT_FIELDS} == one
    # Exclusive, and a prefix names the cursor as well as the whole ID.
    assert [s["id"] for s in _lines(till, "alpha", "--once", "--after", one["id"][:10])] == [
        two["id"]
    ]
    assert _lines(till, "alpha", "--once", "--after", two["id"]) == []


def test_human_output_is_one_line_per_snapshot(till: Till, attached: Path) -> None:
    path, fork = _fork(till, "alpha")
    one = _snap(till, path, "one.txt", "first change")
    run = till("watch-fork", "alpha", "--once", "--after", fork["head"])
    assert run.code == 0, run.stderr
    [line] = run.stdout.splitlines()
    assert one["short"] in line and "first change" in line and "fork alpha" in line


def test_an_unknown_fork_is_the_forks_not_found(till: Till, attached: Path) -> None:
    run = till("--json", "watch-fork", "nope")
    assert run.code == 1
    assert run.error["code"] == -32061 and run.error["name"] == "fork.not_found"
    assert "till forks" in run.error["next"]
    run = till("--json", "watch-fork", "Bad Name", "--once", "--after", "abcdef")
    assert run.code == 1 and run.error["name"] == "fork.invalid_name"


def test_a_removed_fork_is_not_found(till: Till, attached: Path) -> None:
    _path, fork = _fork(till, "alpha")
    till.json("fork-rm", "alpha", "--yes")
    run = till("--json", "watch-fork", "alpha", "--once", "--after", fork["base"])
    assert run.code == 1 and run.error["name"] == "fork.not_found"


def test_once_without_after_is_refused_as_it_could_never_print_anything(
    till: Till, attached: Path
) -> None:
    _fork(till, "alpha")
    run = till("--json", "watch-fork", "alpha", "--once")
    assert run.code == 1 and run.error["name"] == "invalid_argument"
    assert "--after" in run.error["message"]


@pytest.mark.parametrize(
    ("after", "name"),
    [("xyz", "snapshot.bad_id"), ("abc", "snapshot.bad_id"), ("0" * 64, "snapshot.not_found")],
)
def test_a_bad_cursor_is_answered_before_anything_is_printed(
    till: Till, attached: Path, after: str, name: str
) -> None:
    _fork(till, "alpha")
    run = till("--json", "watch-fork", "alpha", "--once", "--after", after)
    assert run.code == 1 and run.error["name"] == name, run.stdout


def test_a_fork_of_a_fork_is_watched_from_its_parent(till: Till, attached: Path) -> None:
    path, _ = _fork(till, "alpha")
    inner = till.json("fork", "inner", cwd=path)["fork"]
    sealed = _snap(till, Path(inner["path"]), "deep.txt", "deep")
    run = till("--json", "watch-fork", "inner", "--once", "--after", inner["head"], cwd=path)
    assert run.code == 0, run.stdout
    assert [json.loads(line)["id"] for line in run.stdout.splitlines()] == [sealed["id"]]
    # From the root the grandchild is no fork of this workspace.
    assert till("--json", "watch-fork", "inner").error["name"] == "fork.not_found"


# -- following -------------------------------------------------------------------------------


class Watcher:
    """A `till --json watch-fork` process whose stdout lines and stderr are read as they come."""

    def __init__(self, till: Till, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "watch-fork", *args],
            cwd=till.cwd,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.errors: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.errors), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, into: queue.Queue[str]) -> None:
        for line in stream:
            into.put(line)

    def ready(self, timeout: float = 60) -> str:
        """Waits for the line the stream prints on stderr once its place is taken: from then
        on, every snapshot the fork seals reaches stdout."""
        try:
            note = self.errors.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no readiness line in {timeout} s") from None
        assert note.startswith("till: following fork"), note
        return note

    def take(self, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        """The next `count` lines, parsed; fails at the deadline."""
        deadline = time.monotonic() + timeout
        got = []
        while len(got) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"only {len(got)} of {count} lines arrived in {timeout} s"
            try:
                got.append(json.loads(self.lines.get(timeout=left)))
            except queue.Empty:
                continue
        return got

    def end(self, sig: int | None = None, timeout: float = 60) -> tuple[int, list[str]]:
        """Signals the process (when `sig`), waits for it, and returns its status and the
        stdout lines not taken yet."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return code, rest


def test_following_delivers_only_new_snapshots_and_ends_when_the_fork_is_removed(
    till: Till, attached: Path
) -> None:
    path, _fork_doc = _fork(till, "alpha")
    before = _snap(till, path, "before.txt", "before the watch")
    watcher = Watcher(till, "alpha")
    try:
        watcher.ready()
        one = _snap(till, path, "one.txt", "one")
        _snap(till, attached, "parent.txt", "the parent's")  # another timeline: no line
        [first] = watcher.take(1)
        assert first["id"] == one["id"] and first["fork"] == "alpha"
        assert first["id"] != before["id"]
        (path / "last.txt").write_text("unsealed\n")  # fork-rm seals it as the last state
        removed = till.json("fork-rm", "alpha", "--yes")
        [last] = watcher.take(1)
        assert last["id"] == removed["snapshot"]["id"] and last["trigger"] == "fork"
        code, rest = watcher.end()  # it ends by itself: the fork is gone
    finally:
        if watcher.proc.poll() is None:
            watcher.end(signal.SIGKILL)
    assert code == 0 and rest == []


def test_following_after_a_snapshot_replays_what_came_since_then_waits(
    till: Till, attached: Path
) -> None:
    path, fork = _fork(till, "alpha")
    missed = _snap(till, path, "missed.txt", "sealed while nobody watched")
    watcher = Watcher(till, "alpha", "--after", fork["head"])
    try:
        assert fork["head"][:12] in watcher.ready()
        [replayed] = watcher.take(1)
        assert replayed["id"] == missed["id"]
        new = _snap(till, path, "new.txt", "new")
        [arrived] = watcher.take(1)
        assert arrived["id"] == new["id"]
        code, rest = watcher.end(signal.SIGINT)
    finally:
        if watcher.proc.poll() is None:
            watcher.end(signal.SIGKILL)
    # Interrupted, it ends as the contract says: one `interrupted` document, status 130.
    assert code == 130
    assert [json.loads(line)["error"]["name"] for line in rest] == ["interrupted"]


@pytest.mark.process
def test_following_ends_on_sigterm_with_the_interrupted_document(
    till: Till, attached: Path
) -> None:
    _fork(till, "alpha")
    watcher = Watcher(till, "alpha")
    watcher.ready()
    code, rest = watcher.end(signal.SIGTERM)
    assert code == 143
    assert [json.loads(line)["error"]["name"] for line in rest] == ["interrupted"]


@pytest.mark.parametrize("moment", ["before the cursor is taken", "before the fork is looked up"])
def test_a_fork_removed_while_the_stream_takes_its_place_is_never_waited_for(
    till: Till, attached: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """Whenever another process removes the fork while the stream starts, the answer is
    not_found or a stream that ends: the cursor is taken before the fork is looked up, so a
    removal the lookup does not see comes after the cursor. (Looked up first, a removal
    between the lookup and the cursor would leave the stream waiting forever.)"""
    import tillage.api
    from tillage.features.forks import watching
    from tillage.features.forks.errors import ForkNotFoundError
    from tillage.store.store import Store

    path, _fork_doc = _fork(till, "alpha")
    removed: list[bool] = []

    def remove_once() -> None:
        if not removed:
            removed.append(True)
            assert till.json("fork-rm", "alpha", "--yes")["removed"] is True  # someone else

    if moment == "before the cursor is taken":
        last_seq = Store.last_seq

        def cursor(store: Store) -> int:
            remove_once()
            return last_seq(store)

        monkeypatch.setattr(Store, "last_seq", cursor)
    else:
        looked_up = watching.require_fork

        def lookup(ws: Any, name: str) -> Any:
            remove_once()
            return looked_up(ws, name)

        monkeypatch.setattr(watching, "require_fork", lookup)
    try:
        stream = tillage.api.call("fork.watch", home=till.home, folder=attached, name="alpha")
    except ForkNotFoundError:
        stream = None
    assert removed and not path.exists()
    if stream is not None:
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.extend(iter(stream)), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert not reader.is_alive(), "the stream waits for a removal it already passed"
        assert got == []


# -- the tool --------------------------------------------------------------------------------


def test_the_tool_answers_what_the_fork_sealed_after_a_snapshot_and_never_streams(
    till: Till, attached: Path
) -> None:
    tillage.agent.forget()
    path, fork = _fork(till, "alpha")
    one = _snap(till, path, "one.txt", "one")
    [tool] = [t for t in tillage.agent.tools(attached, home=till.home) if "fork_snap" in t.name]
    assert tool.name == "workspace_fork_snapshots"
    assert set(tool.input_schema["properties"]) == {"name", "after"}  # `once` is fixed
    assert tool.annotations["readOnlyHint"] is True

    result = tool.call({"name": "alpha", "after": fork["head"]})

    assert not result.is_error, result.text
    assert [s["id"] for s in result.document["snapshots"]] == [one["id"]]
    assert result.document["fork"] == "alpha"
    assert one["id"] in result.text and "after" in result.text
    nothing = tool.call({"name": "alpha", "after": one["id"]})
    assert nothing.document["snapshots"] == [] and "nothing" in nothing.text
    missing = tool.call({"name": "alpha"})
    assert missing.is_error and missing.document["error"]["name"] == "invalid_argument"
