"""Every verb's human page, rendered from a real scene with colour on and off.

One scene (a real project with forks, a radar conflict, claims, sessions with commits, a merge,
a conflicting merge, a rewind, a remote, a clone, events of every kind) runs every verb of the
registry with `--json`; each document is then rendered as a person at a terminal would read it,
in colour and without. A page must not crash, must not show an escape sequence as text (`\\x1b`
painted, then escaped), must carry no escape at all when colour is off, and must be the verb's
own: a page that tells every field, not the generic key/value listing. A verb added to the
registry without a step here fails test_the_scene_covers_every_verb.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till
from tests.helpers import make_project

from tillage.hosts.cli.colour import Style
from tillage.hosts.cli.human import LINE_RENDERERS, leftover, line, render, renderer_for
from tillage.verbs.registry import all_verbs, verb_for_command

# Verbs whose output is not a page, on purpose: their bytes are the answer (a file's content,
# a value, the guide's markdown), or they serve a protocol on stdio and print nothing else.
NOT_PAGES = {
    "agents-md": "prints the guide's markdown itself",
    "cat": "prints the file's bytes",
    "coord read": "prints the value's bytes",
    "completion": "prints the shell's completion script",
    "remote-serve": "serves the remote protocol on stdio",
    "ui": "serves Mission Control until stopped; it prints only its URL (tests/web)",
}
# `till mcp` serves on stdio; `till mcp --list` is its page (run in the scene).


class Scene:
    """Runs `till --json` against one store, keeping every document it answered."""

    def __init__(self, till: Till) -> None:
        self.till = till
        self.pages: list[tuple[str, str, Any, bool]] = []  # (command line, verb, doc, a stream)

    def __call__(
        self,
        cli: str,
        *args: str,
        code: int = 0,
        cwd: Path | None = None,
        stdin: str | None = None,
        stream: bool = False,
    ) -> Any:
        run = self.till("--json", *cli.split(), *args, cwd=cwd, stdin=stdin)
        assert run.code == code, (cli, args, run.code, run.stdout, run.stderr)
        docs = [json.loads(text) for text in run.stdout.splitlines()]
        self.keep(cli, args, docs, stream=stream)
        return docs if stream else docs[0]

    def keep(self, cli: str, args: tuple[str, ...], docs: list[Any], *, stream: bool) -> None:
        verb = verb_for_command(cli)
        assert verb is not None, cli
        for doc in docs:
            self.pages.append((" ".join((cli, *args)), verb.contract.name, doc, stream))


def test_the_scene_covers_every_verb(scene: Scene) -> None:
    run = {words.split(" -")[0].strip() for words, _verb, _doc, _stream in scene.pages}
    every = {v.contract.cli for v in all_verbs()}
    ran = {cli for cli in every if any(w == cli or w.startswith(cli + " ") for w in run)}
    assert every - ran - set(NOT_PAGES) == set()


def test_every_page_renders_in_colour_and_without(scene: Scene) -> None:
    now = time.time()
    for words, verb, doc, stream in scene.pages:
        for colour in (True, False):
            style = Style(colour)
            if stream:
                text = line(verb, doc, style)
            else:
                text = render(verb, doc, now=now, style=style)
                preview = render(verb, doc, now=now, style=style, footer=False)
                assert "\\x1b" not in preview, (words, preview)
            assert text.strip(), words
            assert "\\x1b" not in text, (words, text)  # painted, then escaped: shown as text
            if not colour:
                assert "\x1b" not in text, (words, text)


def test_every_page_is_the_verbs_own(scene: Scene) -> None:
    generic = []
    for words, verb, doc, stream in scene.pages:
        if stream:
            if verb not in LINE_RENDERERS:
                generic.append((words, "no line of its own"))
        elif renderer_for(verb) is None:
            generic.append((words, "no page"))
        elif leftover(verb, doc):
            generic.append((words, leftover(verb, doc)))
    assert generic == [], "\n".join(map(repr, generic))


def _follow_once(till: Till) -> list[Any]:
    """`till --json sync --follow`'s first cycle: it runs until interrupted, so as a process."""
    proc = till.spawn("--json", "sync", "--follow")
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    return [json.loads(first)]


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    base = tmp_path_factory.mktemp("scene")
    user_home = base / "home"
    folder = user_home / "project"
    folder.mkdir(parents=True)
    till = Till(base / "store", user_home, folder)
    s = Scene(till)
    make_project(folder)

    # The timeline.
    s("version")
    s("contracts")
    s("estimate")
    s("watch", "--no-daemon")
    first = s("snap", "-m", "first")["snapshot"]["id"]
    s("status")
    (folder / "README.md").write_text("# changed\n")
    s("snap", "-m", "second")
    s("status", "--fidelity")
    s("timeline")
    s("timeline", "-n", "1")  # "… N more"
    s("show", first)
    s("diff", first)
    s("diff", first, "--to", "head", "--stat")
    s("diff", "head~1", "-p")
    s("ls", first)
    s("ls", "head", "-l", "-n", "2")  # a page, and the command for the next one
    s("pin", first)
    s("unpin", first)
    s("rewind", first, "--paths", "README.md", "--dry-run")
    s("rewind", first, "--paths", "README.md", "--yes")
    rewound = s("op log", "-n", "5")["operations"][0]
    s("undo", rewound["id"], "--dry-run")
    s("undo", rewound["id"], "--yes")
    s("rewind", first, "--paths", "README.md", "--yes")
    s("verify")
    s("hook", "turn-end", "--agent", "claude-code", stdin="{}")
    (folder / "hooked.txt").write_text("a turn's work\n")
    s("hook", "turn-end", "--agent", "claude-code", "--session", "s9", stdin="{}")

    # Universes: two forks that change the same file (a radar conflict, then a merge conflict).
    s("fork", "one")
    s("fork", "two")
    forks = {f["name"]: Path(f["path"]) for f in s("forks")["forks"]}
    (forks["one"] / "README.md").write_text("# from one\n")
    (forks["one"] / "one.txt").write_text("one\n")
    (forks["two"] / "README.md").write_text("# from two\n")
    s("snap", cwd=forks["one"])
    s("snap", cwd=forks["two"])
    s("forks")
    s("radar")
    claim = s("claim", "src/**", "--owner", "agent-1")["claim"]["id"]
    s("claims")
    s("release", claim, "--owner", "agent-1")
    s("merge", "one", "--dry-run")
    s("merge", "one", "--check", "true")
    s("merge", "two", code=3)
    s("run", "three", "--", "true")
    s("exec", "-n", "2", "--plan", "--", "true")
    s("exec", "-n", "1", "--", "true")
    three = next(f for f in s("forks")["forks"] if f["name"] == "three")
    s("watch-fork", "three", "--once", "--after", three["base"], stream=True)
    s("fork-rm", "three", "--yes")
    s("coord write", "plan", "--owner", "lead", stdin="from stdin\n")
    s("coord list")
    s("try", "--", "true")
    s("bisect", "--good", first, "--", "test ! -e one.txt")

    # Sessions with commits, projection, the store's lifecycle.
    s("session start", "s1", "-m", "task")
    (folder / "session.txt").write_text("made in the session\n")
    commit = s("session record", "s1", "-m", "after")["commit"]["id"]
    (folder / "session.txt").write_text("changed again\n")
    s("session record", "s1", "-m", "again")
    s("session log", "s1")
    s("sessions")
    s("session diff", commit)
    s("session changelog", "s1")
    s("session revert", commit, "--dry-run")
    s("session revert", commit, "--yes")
    s("session end", "s1")
    s("session cleanup", "--dry-run")
    collection = base / "collection"
    collection.mkdir()
    (collection / "note.md").write_text("hello\n")
    place = base / "place"
    place.mkdir()
    mount = f"notes=dir:{collection}"
    s("project hydrate", "--mount", mount, cwd=place)
    (place / "notes" / "note.md").write_text("hello again\n")
    s("project flush", "--mount", mount, cwd=place)
    s("retention")
    s("budget")
    s("gc", "--dry-run")
    s("gc", "--yes")

    # Sync: a remote, a push, a clone, a pull, a follower's cycle, the remote's upkeep.
    remote = base / "remote"
    key = s("remote add", str(remote))["key"]
    s("remote list")
    s("sync", "--push")
    s("sync", "--push")  # nothing new to send
    clone = Path(s("clone", str(remote), str(base / "clone"), "--key", key)["workspace"])
    s("sync", "--pull", cwd=clone)
    (folder / "pushed-later.txt").write_text("from the first machine\n")
    s("sync", "--push")
    s("sync", "--pull", cwd=clone)  # a fast-forward
    s.keep("sync", ("--follow",), _follow_once(till), stream=True)
    s("work", "--remote", str(remote), "--key", key, "--result-ref", "ci", "--", "true")
    s("remote refs")
    s("remote repair-ref")
    s("remote check")
    s("remote repair")
    s("remote rekey")
    s("mcp", "--list")
    s("mcp", "--list", cwd=base)  # a folder that is not attached

    # Every kind of event so far, then the end of a workspace.
    s("events", "-n", "200", stream=True)
    s("forget")
    other = user_home / "other"
    other.mkdir()
    (other / "x.txt").write_text("x\n")
    s("watch", "--no-daemon", cwd=other)
    s("forget", "--purge", "--yes", cwd=other)

    # A store with a damaged pack: what verify finds, then what a repair does.
    s("status", cwd=forks["one"])  # a fork's status names its parent
    pack = max((base / "store" / "packs").glob("*.pack"), key=lambda p: p.stat().st_size)
    with open(pack, "r+b") as f:
        f.seek(pack.stat().st_size // 2)
        f.write(b"\xff" * 64)
    s("verify", code=1)
    s("verify", "--repair", code=1)
    os.sync()
    return s


def test_a_fast_forwarded_pull_says_how_to_undo_it(scene: Scene) -> None:
    pulled = [d for _w, v, d, _s in scene.pages if d.get("disposition") == "fast_forwarded"]
    assert pulled, "the scene has a fast-forwarded pull"
    text = render("sync.run", pulled[0], now=time.time())
    assert text.startswith("Fast-forwarded to ")
    assert text.rstrip().endswith(f"till rewind {pulled[0]['undo'][:12]} --yes")


def test_a_hook_in_a_session_names_the_commit_it_recorded(scene: Scene) -> None:
    hooked = [d for _w, v, d, _s in scene.pages if v == "agent.hook" and d.get("session_commit")]
    assert hooked, "the scene has a hook in a session"
    text = render("agent.hook", hooked[0], now=time.time())
    assert f"Recorded as commit {hooked[0]['session_commit'][:12]} of session s9." in text


def test_a_forks_status_names_a_parent_that_was_forgotten(scene: Scene) -> None:
    status = [d for _w, v, d, _s in scene.pages if v == "workspace.status" and d.get("fork")]
    assert status, "the scene has a fork's status after its parent was forgotten"
    text = render("workspace.status", status[-1], now=time.time())
    assert "of None" not in text
    assert re.search(r"Fork +one of workspace [0-9a-f]{12} \(no longer attached\)", text)


# -- shapes the scene does not reach: a failing cycle, a damaged remote ---------------------------

CYCLE = {
    "cycle": 4,
    "at": "2026-12-01T04:31:02Z",
    "remote": "origin",
    "ref": "main",
    "pulled": None,
    "fetched_objects": 0,
    "pushed": None,
    "uploaded_objects": 0,
    "uploaded_bytes": 0,
    "paused": False,
    "incoming": None,
    "next_step": None,
    "error": None,
    "merged": None,
    "conflicts": [],
    "retry_in": 0.0,
}


def test_a_follower_cycle_that_failed_or_paused_says_what_comes_next() -> None:
    failed = {
        **CYCLE,
        "error": {"code": 1, "name": "x", "message": "the remote is down", "next": "wait"},
        "retry_in": 8.0,
    }
    text = line("sync.run", failed, Style(True))
    assert "error: the remote is down (wait)" in text and "next cycle in 8 s" in text
    paused = {
        **CYCLE,
        "pulled": "diverged",
        "paused": True,
        "incoming": "ab" * 32,
        "conflicts": ["README.md"],
        "next_step": "till merge --snapshot abababababab",
    }
    text = line("sync.run", paused)
    assert "paused: 1 conflict" in text and "README.md" in text
    assert text.endswith("then: till merge --snapshot abababababab")
    pushed = {**CYCLE, "pulled": "up_to_date", "pushed": "cd" * 32, "uploaded_objects": 3}
    assert "pushed cdcdcdcdcdcd (3 objects, 0 B)" in line("sync.run", pushed)


def test_a_damaged_remote_names_its_problems_and_what_was_left() -> None:
    problem = {"object": "ef" * 32, "problem": "a pack's trailer does not verify"}
    check = {
        "ok": False,
        "remote": "origin",
        "packs": 3,
        "blobs": 40,
        "refs": 1,
        "unindexed_packs": 1,
        "problems": [problem],
    }
    text = render("remote.check", check, now=0.0)
    assert text.startswith("Remote origin has 1 problem (3 packs, 40 blobs, 1 ref checked):")
    assert "efefefefefef  a pack's trailer does not verify" in text
    assert text.rstrip().endswith("till remote repair")
    repair = {
        "ok": False,
        "remote": "origin",
        "problems": [problem],
        "salvaged_objects": 2,
        "resent_objects": 0,
        "reindexed_packs": 1,
        "removed_packs": 1,
        "removed_indexes": 0,
        "unrepaired": [
            {"object": "ef" * 32, "ref": "main", "pushed_by": "m-1", "this_machine": False}
        ],
        "next": "run `till remote repair` on a machine whose store holds these objects",
    }
    text = render("remote.repair", repair, now=0.0)
    assert "2 objects salvaged from damaged packs" in text and "1 damaged pack removed" in text
    assert "1 object could not be repaired from here:" in text and "pushed by m-1" in text
    for verb, doc in (("remote.check", check), ("remote.repair", repair)):
        assert leftover(verb, doc) == {}, verb
