"""`till hook install` for Claude Code: what lands in the settings files Claude Code reads, and
the hooks run exactly as Claude Code runs them.

The project's `.claude/settings.json` is committed by teams: it names `till` on PATH and the
folder as `"$CLAUDE_PROJECT_DIR"`, nothing of this machine. Where the `till` on PATH is not this
tillage, the hooks go in `.claude/settings.local.json` (never committed) with the absolute path,
and the result says which file and why. Claude Code's hooks are `{"hooks": {EVENT: [{"matcher":
..., "hooks": [{"type": "command", "command": ...}]}]}}` (matchers only for tool events); it
runs each command through a shell, with CLAUDE_PROJECT_DIR set and the event's JSON on stdin.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.hooks.test_hooks import hook, ok

pytestmark = pytest.mark.process

SCRIPT = Path(sys.executable).with_name("till")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the till console script is missing")
ON_PATH = {"PATH": f"{SCRIPT.parent}:/usr/bin:/bin"}
NOT_ON_PATH = {"PATH": "/usr/bin:/bin"}
not_on_path = pytest.mark.skipif(
    shutil.which("till", path=NOT_ON_PATH["PATH"]) is not None, reason="a till in /usr/bin"
)
WRITE_TOOLS = "Bash|Edit|MultiEdit|Write|NotebookEdit"
SESSION = "9b2f6a1e-3c4d-4e5f-8a7b-0c1d2e3f4a5b"


def claude_settings(till_words: str) -> dict[str, Any]:
    """Exactly what Claude Code reads from tillage's install: four events, one command each."""

    def entry(event: str) -> dict[str, Any]:
        command = f'{till_words} --repo "$CLAUDE_PROJECT_DIR" hook {event} >/dev/null'
        return {"hooks": [{"type": "command", "command": command}]}

    return {
        "hooks": {
            "UserPromptSubmit": [entry("pre-turn")],
            "PostToolUse": [{"matcher": WRITE_TOOLS, **entry("post-tool")}],
            "Stop": [entry("turn-end")],
            "SessionEnd": [entry("session-end")],
        }
    }


def payload(event: str, cwd: Path, **extra: Any) -> dict[str, Any]:
    """Claude Code's stdin document: the common fields, then the event's own."""
    return {
        "session_id": SESSION,
        "transcript_path": f"/home/u/.claude/projects/p/{SESSION}.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def run_as_claude(
    till: Till, command: str, project: Path, doc: dict[str, Any], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Runs a hook command as Claude Code does: through a shell, from wherever, with the
    project named in CLAUDE_PROJECT_DIR and the payload on stdin."""
    return subprocess.run(
        ["/bin/sh", "-c", command],
        cwd="/",
        env={**till.env(), **env, "CLAUDE_PROJECT_DIR": str(project)},
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=120,
    )


def installed(project: Path, name: str = "settings.json") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((project / ".claude" / name).read_text())
    return doc


def command_for(project: Path, event: str, name: str = "settings.json") -> str:
    groups = installed(project, name)["hooks"][event]
    commands = [h["command"] for g in groups for h in g["hooks"] if " hook " in h["command"]]
    assert len(commands) == 1, commands
    return str(commands[0])


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    return folder


@needs_script
def test_the_project_settings_name_till_on_path_and_claude_project_dir(
    till: Till, attached: Path
) -> None:
    doc = ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    settings = attached / ".claude" / "settings.json"
    assert doc["installed"] == [str(settings)] and doc["settings"] == str(settings)
    assert installed(attached) == claude_settings("till")
    text = settings.read_text()
    assert str(attached) not in text and str(SCRIPT.parent) not in text  # nothing of here
    assert "settings.json" in doc["note"] and "on PATH" in doc["note"]
    assert not (attached / ".claude" / "settings.local.json").exists()
    again = ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    assert again["installed"] == [] and settings.read_text() == text  # idempotent


@not_on_path
def test_without_till_on_path_the_hooks_go_in_the_local_settings_with_its_path(
    till: Till, attached: Path
) -> None:
    doc = ok(hook(till, "install", "--no-watcher", env=NOT_ON_PATH))
    local = attached / ".claude" / "settings.local.json"
    assert doc["installed"] == [str(local)] and doc["settings"] == str(local)
    assert "settings.local.json" in doc["note"] and "not on PATH" in doc["note"]
    assert not (attached / ".claude" / "settings.json").exists()  # the shared file: untouched
    command = command_for(attached, "Stop", "settings.local.json")
    assert command.split()[0].startswith("/") and '"$CLAUDE_PROJECT_DIR"' in command
    (attached / "a.txt").write_text("the turn's work")
    run = run_as_claude(
        till, command, attached, payload("Stop", attached, stop_hook_active=False), NOT_ON_PATH
    )
    assert (run.returncode, run.stdout) == (0, ""), run.stderr
    snap = till.json("timeline")["snapshots"][0]
    assert (snap["label"], snap["session"]) == ("hook turn-end agent=claude-code", SESSION)


@needs_script
@not_on_path
def test_the_hooks_stay_in_one_file_and_others_settings_stay(till: Till, attached: Path) -> None:
    claude = attached / ".claude"
    claude.mkdir()
    notify = {"type": "command", "command": "notify-send done"}
    mine = {"permissions": {"allow": ["Bash(make)"]}, "hooks": {"Stop": [{"hooks": [notify]}]}}
    (claude / "settings.local.json").write_text(json.dumps(mine, indent=2))
    ok(hook(till, "install", "--no-watcher", env=NOT_ON_PATH))
    local = installed(attached, "settings.local.json")
    assert local["hooks"]["Stop"][0] == {"hooks": [notify]}
    moved = ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    assert moved["installed"] == [str(claude / "settings.json")]
    assert moved["removed"] == [str(claude / "settings.local.json")]
    assert installed(attached) == claude_settings("till")
    assert installed(attached, "settings.local.json") == mine  # exactly theirs again


@needs_script
def test_uninstall_takes_out_only_ours_from_both_files(till: Till, attached: Path) -> None:
    claude = attached / ".claude"
    claude.mkdir()
    theirs = {
        "model": "opus",
        "hooks": {
            "PostToolUse": [
                {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
            ],
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "notify-send done"},
                        {  # an older install's entry, among theirs
                            "type": "command",
                            "command": "/opt/v/bin/till --repo /old/p hook turn-end >/dev/null",
                        },
                    ]
                }
            ],
        },
    }
    (claude / "settings.json").write_text(json.dumps(theirs, indent=2))
    ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    old = {"type": "command", "command": "/x/python -m tillage --repo /p hook pre-turn"}
    old_local = {"hooks": {"UserPromptSubmit": [{"hooks": [old]}]}}
    # another checkout's local hooks, as an older install left them
    (claude / "settings.local.json").write_text(json.dumps(old_local))
    done = ok(hook(till, "uninstall"))
    assert sorted(done["removed"]) == sorted(
        [str(claude / "settings.json"), str(claude / "settings.local.json")]
    )
    expected = json.loads(json.dumps(theirs))
    expected["hooks"]["Stop"][0]["hooks"].pop()  # ours, whoever wrote it
    assert installed(attached) == expected
    assert installed(attached, "settings.local.json") == {}
    again = ok(hook(till, "uninstall"))
    assert again["removed"] == [] and "no claude-code hooks" in again["note"]


@needs_script
def test_claude_code_sessions_end_their_chains(till: Till, attached: Path) -> None:
    """The four hooks, run as Claude Code runs them with its payloads: the session's changelog
    starts at the prompt, records the turn at Stop and ends at SessionEnd."""
    ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    edited = attached / "src.py"

    def claude(event: str, **extra: Any) -> None:
        command = command_for(attached, event)
        run = run_as_claude(till, command, attached, payload(event, attached, **extra), ON_PATH)
        assert (run.returncode, run.stdout) == (0, ""), run.stderr

    claude("UserPromptSubmit", prompt="add a function")
    edited.write_text("def f():\n    return 1\n")
    claude(
        "PostToolUse",
        tool_name="Write",
        tool_input={"file_path": str(edited), "content": edited.read_text()},
        tool_response={"filePath": str(edited), "success": True},
        tool_use_id="toolu_01",
    )
    claude("Stop", stop_hook_active=False)
    edited.write_text("def f():\n    return 2\n")  # changed after the turn, before the exit
    claude("SessionEnd", reason="prompt_input_exit")
    sessions = till.json("sessions")["sessions"]
    assert [(s["id"], s["ended"]) for s in sessions] == [(SESSION, True)]
    changelog = till.json("session", "changelog", SESSION)
    assert changelog["ended"] is True
    commits = changelog["commits"]
    assert [c["is_baseline"] for c in commits] == [True, False, False]
    assert [c["path"] for c in commits[1]["changes"]] == ["src.py"]
    assert commits[2]["description"].startswith("hook session-end agent=claude-code")
    newest = till.json("timeline")["snapshots"][0]
    assert newest["label"] == "hook session-end agent=claude-code turn=1 reason=prompt_input_exit"
    assert till("cat", newest["id"], "src.py").stdout == "def f():\n    return 2\n"


@needs_script
def test_a_session_end_with_nothing_changed_seals_nothing_and_still_ends(
    till: Till, attached: Path
) -> None:
    stop = json.dumps(payload("Stop", attached, stop_hook_active=False))
    ok(hook(till, stdin=stop))
    count = len(till.json("timeline", "-n", "1000")["snapshots"])
    doc = ok(hook(till, stdin=json.dumps(payload("SessionEnd", attached, reason="clear"))))
    assert (doc["event"], doc["sealed"]) == ("session-end", False)
    assert len(till.json("timeline", "-n", "1000")["snapshots"]) == count
    assert till.json("sessions")["sessions"][0]["ended"] is True


@contextlib.contextmanager
def stopping_its_watcher(till: Till) -> Iterator[None]:
    """Stops the watcher the test started (by its pid), whatever happened."""
    try:
        yield
    finally:
        watcher = till.json("status").get("watcher") or {}
        pid = watcher.get("pid")
        if isinstance(pid, int):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            till.json("watch", "--stop")


@needs_script
def test_install_starts_the_watcher_and_says_so(till: Till, attached: Path) -> None:
    assert till.json("status")["watching"] is False
    with stopping_its_watcher(till):
        doc = ok(hook(till, "install", env=ON_PATH))
        assert doc["watching"] is True and "started the folder's watcher" in doc["note"]
        assert till.json("status")["watching"] is True
        again = ok(hook(till, "install", env=ON_PATH))
        assert again["watching"] is True and "started" not in again["note"]


def test_install_with_no_watcher_leaves_it_off(till: Till, attached: Path) -> None:
    doc = ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    assert doc["watching"] is None
    assert till.json("status")["watching"] is False


def test_generic_uninstall_removes_only_its_scripts(till: Till, attached: Path) -> None:
    ok(hook(till, "install", "--agent", "generic", "--no-watcher"))
    folder = attached / ".tillage" / "hooks"
    (folder / "my-own").write_text("#!/bin/sh\necho mine\n")
    (folder / "pre-turn").write_text("#!/bin/sh\n# edited by hand: not ours any more\n")
    done = ok(hook(till, "uninstall", "--agent", "generic"))
    gone = ("post-tool", "turn-end", "session-end")
    assert done["removed"] == [str(folder / e) for e in gone]
    assert sorted(p.name for p in folder.iterdir()) == ["my-own", "pre-turn"]


@needs_script
def test_a_settings_file_that_cannot_be_read_leaves_both_as_they_were(
    till: Till, attached: Path
) -> None:
    claude = attached / ".claude"
    claude.mkdir()
    broken = b'{"hooks": {"Stop": [ // half-written\n'
    (claude / "settings.local.json").write_bytes(broken)
    run = hook(till, "install", "--no-watcher", env=ON_PATH)
    assert run.code == 1 and run.error["name"] == "hook.invalid_settings"
    assert str(claude / "settings.local.json") in run.error["message"]
    assert sorted(p.name for p in claude.iterdir()) == ["settings.local.json"]
    assert (claude / "settings.local.json").read_bytes() == broken
