"""Every verb once as the installed `till` command, a real process of its own.

The rest of the suite calls the command line in this process (tests/conftest.Till) to keep the
suite fast; this story is the proof that each verb's process door works too: argv parsing,
start-up, exit status and the one JSON document on stdout. A verb added to the registry
without a step here fails test_the_stories_cover_every_verb. The stories are four tests, so
the workers run them at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till
from tests.helpers import make_project

from tillage.verbs.registry import all_verbs

pytestmark = pytest.mark.process


class Story:
    """Runs `till` as a process, remembering which verbs it has run."""

    def __init__(self, till: Till) -> None:
        self.till = till
        self.covered: set[str] = set()

    def __call__(
        self, verb: str, *args: str, code: int = 0, cwd: Path | None = None, stdin: str = ""
    ) -> Any:
        """Runs `till --json VERB ARGS...`, checks its exit status and returns its document."""
        self.covered.add(verb)
        argv = [sys.executable, "-m", "tillage", "--json", *verb.split(), *args]
        proc = subprocess.run(
            argv,
            cwd=cwd or self.till.cwd,
            env=self.till.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == code, (verb, args, proc.returncode, proc.stdout, proc.stderr)
        lines = proc.stdout.splitlines()
        if len(lines) > 1:  # a stream: a document a line (events)
            return [json.loads(line) for line in lines]
        return json.loads(lines[0]) if lines else None

    def serve(self, verb: str, *args: str) -> Any:
        """Starts `till --json VERB ARGS...`, a door that serves until a signal: its first line
        (where it serves), then SIGTERM, which must end it with status 0."""
        self.covered.add(verb)
        with self.till.spawn("--json", *verb.split(), *args) as proc:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            proc.terminate()
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, (verb, proc.returncode, err)
        return first


# The verbs each story runs (a story may run more, to get where it is going).
STORIES = {
    "timeline": {
        "version", "contracts", "agents-md", "estimate", "watch", "status", "snap", "timeline",
        "show", "diff", "cat", "ls", "pin", "unpin", "rewind", "verify", "events", "hook",
        "forget", "op log", "undo", "completion",
    },
    "universes": {
        "fork", "forks", "radar", "claim", "claims", "release", "merge", "run", "exec",
        "watch-fork", "fork-rm", "try", "bisect", "coord write", "coord read", "coord list",
        "ui",
    },
    "sessions": {
        "session start", "session record", "session log", "sessions", "session diff",
        "session changelog", "session revert", "session end", "session cleanup",
        "project hydrate", "project flush", "retention", "budget", "gc",
    },
    "sync": {
        "remote add", "remote list", "sync", "clone", "work", "remote refs", "remote repair-ref",
        "remote-serve", "mcp", "remote check", "remote repair", "remote rekey",
    },
}  # fmt: skip


def test_the_stories_cover_every_verb() -> None:
    assert set().union(*STORIES.values()) == {v.contract.cli for v in all_verbs()}


@pytest.fixture
def story(till: Till, folder: Path) -> Story:
    """A real project (git, .env, SQLite, a symlink) attached, its first snapshot sealed."""
    make_project(folder)
    attached = Story(till)
    assert attached("watch", "--no-daemon")["workspace"] == str(folder)
    return attached


def test_the_timeline_verbs(story: Story, folder: Path) -> None:
    assert story("version")["version"]
    assert {c["verb"] for c in story("contracts")["verbs"]} >= {"workspace.rewind"}
    assert "till rewind" in story("agents-md")["markdown"]
    assert "complete -o default -F _till till" in story("completion", "bash")["script"]
    assert story("estimate")["files"] > 0
    assert story("status")["attached"] is True
    first = story("snap", "-m", "first")["snapshot"]["id"]
    (folder / "README.md").write_text("# changed\n")
    story("snap", "-m", "second")
    assert first in [s["id"] for s in story("timeline")["snapshots"]]
    assert story("show", first)["snapshot"]["id"] == first
    assert any(c["path"] == "README.md" for c in story("diff", first)["changes"])
    assert story("cat", first, ".env")["content_base64"] == "QVBJX0tFWT1zZWNyZXQK"
    assert ".env" in [e["path"] for e in story("ls", "head~1")["entries"]]
    assert story("pin", first)["snapshot"]["pinned"] is True
    assert story("unpin", first)["snapshot"]["pinned"] is False
    rewound = story("rewind", first, "--paths", "README.md", "--yes")
    assert rewound["undo"] and (folder / "README.md").read_text() == "# demo\n"
    op = story("op log", "-n", "1")["operations"][0]
    assert op["verb"] == "workspace.rewind"
    assert story("undo", op["id"], "--yes")["applied"] is True
    assert (folder / "README.md").read_text() == "# changed\n"
    assert story("verify")["ok"] is True
    assert story("events", "-n", "5")[0]["kind"] == "sealed"
    assert story("hook", "turn-end", "--agent", "claude-code", stdin="{}")["snapshot"]
    assert story("forget")["workspace"] == str(folder)
    assert story.covered == STORIES["timeline"]


def test_the_universe_verbs(story: Story, folder: Path) -> None:
    first = story("timeline")["snapshots"][0]["id"]
    assert story("fork", "one")["fork"]["name"] == "one"
    fork_folder = Path(story("forks")["forks"][0]["path"])
    (fork_folder / "from-fork.txt").write_text("fork\n")
    assert story("radar")["forks_scanned"] == 1
    claim = story("claim", "src/**", "--owner", "agent-1")["claim"]["id"]
    assert [c["id"] for c in story("claims")["claims"]] == [claim]
    assert story("release", claim, "--owner", "agent-1")["released"]["id"] == claim
    assert story("merge", "one", "--check", "true")["landed"] is True
    assert (folder / "from-fork.txt").read_text() == "fork\n"
    assert story("run", "two", "--", "true")["fork"]["exit_code"] == 0
    assert story("exec", "-n", "1", "--", "true")["universes"][0]["exit_code"] == 0
    two = next(f for f in story("forks")["forks"] if f["name"] == "two")
    sealed = story("watch-fork", "two", "--once", "--after", two["base"])
    assert [s["id"] for s in (sealed if isinstance(sealed, list) else [sealed])][-1] == two["head"]
    assert story("fork-rm", "two", "--yes")["name"] == "two"
    written = story("coord write", "plan", "--owner", "lead", stdin="from stdin\n")
    assert story("coord read", "plan", cwd=fork_folder)["value"] == "from stdin\n"
    assert story("coord list")["entries"] == [written]
    assert story("try", "--", "true")["exit_code"] == 0
    assert story("bisect", "--good", first, "--", "test ! -e from-fork.txt")["first_bad"]
    assert story.serve("ui")["url"].startswith("http://127.0.0.1:")
    assert story.covered == STORIES["universes"] | {"watch", "timeline"}


def test_the_session_projection_and_lifecycle_verbs(
    story: Story, folder: Path, tmp_path: Path
) -> None:
    story("session start", "s1", "-m", "task")
    (folder / "session.txt").write_text("made in the session\n")
    commit = story("session record", "s1", "-m", "after")["commit"]["id"]
    assert [c["id"] for c in story("session log", "s1")["commits"]][-1] == commit
    assert [s["id"] for s in story("sessions")["sessions"]] == ["s1"]
    assert story("session diff", commit)["to_commit"]["id"] == commit
    assert story("session changelog", "s1")["session"] == "s1"
    story("session revert", commit, "--yes")
    assert story("session end", "s1")["ended"] is True
    assert story("session cleanup", "--dry-run")["dry_run"] is True

    collection = tmp_path / "collection"
    collection.mkdir()
    (collection / "note.md").write_text("hello\n")
    place = tmp_path / "place"
    place.mkdir()
    mount = f"notes=dir:{collection}"
    assert story("project hydrate", "--mount", mount, cwd=place)["files"] == 1
    assert (place / "notes" / "note.md").read_text() == "hello\n"
    (place / "notes" / "note.md").write_text("hello again\n")
    story("project flush", "--mount", mount, cwd=place)
    assert (collection / "note.md").read_text() == "hello again\n"

    assert story("retention")["retention"]["weekly"] == "forever"
    assert story("budget")["over_budget"] is False
    assert story("gc", "--dry-run")["dry_run"] is True
    assert story.covered == STORIES["sessions"] | {"watch"}


def test_the_sync_verbs_and_the_serving_doors(story: Story, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    key = story("remote add", str(remote))["key"]
    assert [r["name"] for r in story("remote list")["remotes"]] == ["origin"]
    pushed = story("sync", "--push")["snapshot"]["id"]
    clone = story("clone", str(remote), str(tmp_path / "clone"), "--key", key)
    assert (Path(clone["workspace"]) / ".env").read_text() == "API_KEY=secret\n"
    assert story("sync", "--pull", cwd=Path(clone["workspace"]))["disposition"] == "up_to_date"
    work = story("work", "--remote", str(remote), "--key", key, "--result-ref", "ci", "--", "true")
    assert work["exit_code"] == 0 and work["input"] == pushed
    refs = {r["ref"]: r for r in story("remote refs")["refs"]}
    assert refs["main"]["snapshot"] == pushed and refs["main"]["problem"] is None
    assert story("remote repair-ref")["repaired"] is False  # a sound ref is left alone
    assert story("remote check", "--read-data")["ok"] is True
    assert story("remote repair")["ok"] is True
    assert len(story("remote rekey")["key"]) == 64
    assert story("remote-serve", "--stdio", str(remote)) is None  # stdin closed: it ends
    assert story("mcp") is None  # an MCP server on stdio, until stdin closes
    assert story("mcp", "--list")["attached"] is True
    assert story.covered == STORIES["sync"] | {"watch"}
