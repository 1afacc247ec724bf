"""`till hook`: attributed restore points at agent turn boundaries, and installing the hooks.

Every call runs the real `till`, fed what a harness feeds it (a JSON payload on stdin, an
environment), and is judged by what a user sees: the hook's answer, `till timeline`, the files.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, Till

CLAUDE_PAYLOAD = {
    "session_id": "0d6c4c39-8d4e-4f57-9f5e-3f6a3b1c2d7e",
    "transcript_path": "/tmp/transcript.jsonl",
    "cwd": "/somewhere",
    "hook_event_name": "PostToolUse",
    "tool_name": "Edit",
    "tool_input": {"file_path": "a.txt", "old_string": "a", "new_string": "b"},
    "tool_response": {"success": True},
}


def hook(
    till: Till,
    *args: str,
    stdin: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Run:
    """Runs `till --json hook ARGS` as a harness would: stdin a pipe, extra environment."""
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", "--json", "hook", *args],
        cwd=cwd or till.cwd,
        env={**till.env(), **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


# A PATH whose `till` is this tillage's (so the hooks go in the project's settings), and the
# folder Claude Code names in the environment of every hook it runs.
ON_PATH = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
PROJECT = '"$CLAUDE_PROJECT_DIR"'


def install(till: Till, *args: str) -> Run:
    """`till hook install ARGS` with `till` on PATH, leaving the watcher alone."""
    return hook(till, "install", "--no-watcher", *args, env=ON_PATH)


def ok(run: Run) -> Any:
    assert run.code == 0, (run.code, run.stdout, run.stderr)
    return run.doc


def newest(till: Till) -> dict[str, Any]:
    snapshots: list[dict[str, Any]] = till.json("timeline")["snapshots"]
    return snapshots[0]


def count(till: Till) -> int:
    return len(till.json("timeline", "-n", "1000")["snapshots"])


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    (folder / "a.txt").write_text("a")
    (folder / "src").mkdir()
    (folder / "src" / "b.py").write_text("x = 1\n")
    till.json("watch", "--no-daemon")
    return folder


@pytest.mark.process
def test_a_turn_end_hook_seals_a_snapshot_labelled_and_attributed(
    till: Till, attached: Path
) -> None:
    (attached / "a.txt").write_text("changed")
    doc = ok(hook(till, "turn-end", "--agent", "bot", "--turn", "7"))
    assert doc["sealed"] is True and doc["event"] == "turn-end"
    snap = doc["snapshot"]
    assert snap["trigger"] == "hook"
    assert snap["label"] == "hook turn-end agent=bot turn=7"
    assert (snap["agent"], snap["turn"]) == ("bot", "7")
    shown = newest(till)
    assert shown["id"] == snap["id"]
    assert (shown["trigger"], shown["label"], shown["agent"], shown["turn"]) == (
        "hook",
        "hook turn-end agent=bot turn=7",
        "bot",
        "7",
    )
    assert till.json("timeline", "--trigger", "hook")["snapshots"][0]["id"] == snap["id"]


@pytest.mark.process
def test_an_agent_or_turn_that_is_not_known_is_left_out_of_the_label(
    till: Till, attached: Path
) -> None:
    snap = ok(hook(till, "pre-turn"))["snapshot"]
    assert snap["label"] == "hook pre-turn"
    assert (snap["agent"], snap["turn"], snap["session"]) == (None, None, None)


@pytest.mark.process
def test_pre_turn_and_turn_end_mark_the_boundary_even_when_nothing_changed(
    till: Till, attached: Path
) -> None:
    before = count(till)
    assert ok(hook(till, "pre-turn", "--turn", "1"))["sealed"] is True
    assert ok(hook(till, "turn-end", "--turn", "1"))["sealed"] is True
    assert count(till) == before + 2


@pytest.mark.process
def test_the_agent_defaults_to_tillage_agent(till: Till, attached: Path) -> None:
    snap = ok(hook(till, "turn-end", env={"TILLAGE_AGENT": "codex"}))["snapshot"]
    assert snap["agent"] == "codex"
    assert snap["label"] == "hook turn-end agent=codex"
    flagged = ok(hook(till, "turn-end", "--agent", "me", env={"TILLAGE_AGENT": "codex"}))
    assert flagged["snapshot"]["agent"] == "me"


@pytest.mark.process
def test_a_claude_code_payload_on_stdin_names_the_agent_session_and_tool(
    till: Till, attached: Path
) -> None:
    (attached / "a.txt").write_text("edited by the agent")
    doc = ok(hook(till, "post-tool", stdin=json.dumps(CLAUDE_PAYLOAD)))
    snap = doc["snapshot"]
    assert doc["sealed"] is True
    assert snap["agent"] == "claude-code"
    assert snap["session"] == CLAUDE_PAYLOAD["session_id"]
    assert doc["tool"] == "Edit"
    assert snap["label"] == "hook post-tool agent=claude-code tool=Edit"
    session = till.json("timeline", "--session", CLAUDE_PAYLOAD["session_id"])["snapshots"]
    assert [s["id"] for s in session] == [snap["id"]]


@pytest.mark.process
def test_a_payload_too_big_to_read_whole_still_names_the_session(
    till: Till, attached: Path
) -> None:
    (attached / "a.txt").write_text("read a big file")
    big = {**CLAUDE_PAYLOAD, "tool_name": "Read", "tool_response": {"content": "x" * (3 << 20)}}
    snap = ok(hook(till, "post-tool", stdin=json.dumps(big)))["snapshot"]
    assert (snap["agent"], snap["session"]) == ("claude-code", CLAUDE_PAYLOAD["session_id"])


@pytest.mark.process
def test_flags_win_over_the_payload(till: Till, attached: Path) -> None:
    (attached / "a.txt").write_text("edited again")
    doc = ok(
        hook(
            till,
            "post-tool",
            "--agent",
            "me",
            "--tool",
            "Write",
            "--session",
            "s1",
            stdin=json.dumps(CLAUDE_PAYLOAD),
        )
    )
    snap = doc["snapshot"]
    assert (snap["agent"], snap["session"], doc["tool"]) == ("me", "s1", "Write")


@pytest.mark.process
def test_the_event_comes_from_the_payload_when_not_given(till: Till, attached: Path) -> None:
    stop = {**CLAUDE_PAYLOAD, "hook_event_name": "Stop"}
    del stop["tool_name"]
    doc = ok(hook(till, stdin=json.dumps(stop)))
    assert doc["event"] == "turn-end"
    assert doc["snapshot"]["label"] == "hook turn-end agent=claude-code"


@pytest.mark.process
@pytest.mark.parametrize("garbage", ["", "   \n", "not json {", "[1, 2]", '"text"', "\x00\xff"])
def test_a_payload_that_is_not_a_json_object_is_ignored(
    till: Till, attached: Path, garbage: str
) -> None:
    doc = ok(hook(till, "turn-end", "--agent", "bot", stdin=garbage))
    assert doc["sealed"] is True
    assert doc["snapshot"]["agent"] == "bot"
    assert doc["snapshot"]["session"] is None


@pytest.mark.process
def test_post_tool_with_nothing_changed_adds_no_snapshot(till: Till, attached: Path) -> None:
    head = newest(till)
    before = count(till)
    doc = ok(hook(till, "post-tool", "--tool", "Read"))
    assert doc["sealed"] is False
    assert doc["snapshot"]["id"] == head["id"]
    assert "nothing changed" in doc["note"]
    assert count(till) == before


@pytest.mark.process
def test_post_tool_after_a_change_adds_one(till: Till, attached: Path) -> None:
    before = count(till)
    (attached / "src" / "b.py").write_text("x = 2\n")
    doc = ok(hook(till, "post-tool", "--tool", "Edit"))
    assert doc["sealed"] is True
    assert count(till) == before + 1
    assert newest(till)["id"] == doc["snapshot"]["id"]
    assert ok(hook(till, "post-tool"))["sealed"] is False
    assert count(till) == before + 1


@pytest.mark.process
def test_a_folder_that_is_not_attached_exits_0_and_creates_nothing(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a")
    for event in ("pre-turn", "post-tool", "turn-end"):
        doc = ok(hook(till, event, stdin=json.dumps(CLAUDE_PAYLOAD)))
        assert doc["snapshot"] is None and doc["sealed"] is False
        assert "not attached" in doc["note"]
    assert not till.home.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]
    human = subprocess.run(
        [sys.executable, "-m", "tillage", "hook", "turn-end"],
        cwd=folder,
        env=till.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0
    assert "Traceback" not in human.stderr


@pytest.mark.process
def test_a_bad_flag_or_event_is_exit_1_never_2(till: Till, attached: Path) -> None:
    unknown = hook(till, "turn-end", "--no-such-flag")
    assert unknown.code == 1, (unknown.code, unknown.stdout, unknown.stderr)
    event = hook(till, "lunch")
    assert event.code == 1
    assert event.error["name"] == "invalid_argument"
    nothing = hook(till)
    assert nothing.code == 1
    assert nothing.error["name"] == "invalid_argument"


@pytest.mark.process
def test_a_busy_workspace_answers_busy_quickly(till: Till, attached: Path) -> None:
    workspace_id = till.json("status")["id"]
    lock = till.home / "locks" / f"ws-{workspace_id}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        run = hook(till, "turn-end")
        took = time.monotonic() - started
    finally:
        os.close(fd)
    assert run.code == 1
    assert run.error["name"] == "busy"
    assert took < 10


@pytest.mark.process
def test_a_hook_with_stdin_left_open_still_finishes(till: Till, attached: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "hook", "turn-end", "--agent", "bot"],
        cwd=attached,
        env=till.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        # stdin stays open and unwritten, as a harness that never sends its payload leaves it
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        finished = proc.poll() is not None
        if not finished:
            proc.kill()
        out, err = proc.communicate()
    assert finished, "the hook waited for stdin that never came"
    assert proc.returncode == 0, err
    assert json.loads(out)["snapshot"]["agent"] == "bot"


USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"], "deny": []},
    "env": {"FOO": "bar"},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}
        ],
    },
}


def _commands(doc: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in doc["hooks"].get(event, []) for h in g["hooks"]]


@pytest.mark.process
def test_install_merges_into_claude_settings_keeping_everything(till: Till, attached: Path) -> None:
    settings = attached / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=4))
    doc = ok(install(till, "--agent", "claude-code"))
    assert doc["installed"] == [str(settings)]
    merged = json.loads(settings.read_text())
    for key in ("model", "permissions", "env"):
        assert merged[key] == USER_SETTINGS[key]
    assert _commands(merged, "PreToolUse") == ["./check.sh"]
    post = _commands(merged, "PostToolUse")
    assert post[0] == "prettier --write" and len(post) == 2
    for event, ours in (("UserPromptSubmit", "pre-turn"), ("PostToolUse", "post-tool")):
        command = _commands(merged, event)[-1]
        assert f"hook {ours}" in command and f"--repo {PROJECT}" in command
    assert "hook turn-end" in _commands(merged, "Stop")[0]
    assert "hook session-end" in _commands(merged, "SessionEnd")[0]

    assert '\n    "model": "opus"' in settings.read_text()  # the user's indentation is kept

    first = settings.read_bytes()
    again = ok(install(till))
    assert again["installed"] == []
    assert settings.read_bytes() == first


@pytest.mark.process
def test_install_replaces_tillage_hooks_written_elsewhere_instead_of_adding_more(
    till: Till, attached: Path
) -> None:
    settings = attached / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = "/home/someone/.local/bin/till --repo /home/someone/project hook turn-end >/dev/null"
    user = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": theirs}]}]}}
    settings.write_text(json.dumps(user))
    ok(install(till))
    stop = _commands(json.loads(settings.read_text()), "Stop")
    assert stop == [f"till --repo {PROJECT} hook turn-end >/dev/null"]


@pytest.mark.process
def test_install_creates_the_settings_when_there_are_none(till: Till, attached: Path) -> None:
    doc = ok(install(till))
    settings = attached / ".claude" / "settings.json"
    assert doc["installed"] == [str(settings)]
    merged = json.loads(settings.read_text())
    assert set(merged["hooks"]) == {"UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"}


@pytest.mark.process
def test_installed_claude_hooks_work_from_another_folder(
    till: Till, attached: Path, tmp_path: Path
) -> None:
    ok(install(till))
    merged = json.loads((attached / ".claude" / "settings.json").read_text())
    command = _commands(merged, "Stop")[0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (attached / "a.txt").write_text("turn's work")
    stop = {**CLAUDE_PAYLOAD, "hook_event_name": "Stop"}
    del stop["tool_name"]
    run = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=elsewhere,
        env={**till.env(), **ON_PATH, "CLAUDE_PROJECT_DIR": str(attached)},
        input=json.dumps(stop),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # Claude Code adds a prompt hook's stdout to the prompt
    snap = newest(till)
    assert snap["label"] == "hook turn-end agent=claude-code"
    assert snap["session"] == CLAUDE_PAYLOAD["session_id"]


@pytest.mark.process
def test_install_over_settings_that_are_not_json_is_an_error_and_changes_nothing(
    till: Till, attached: Path
) -> None:
    settings = attached / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = b'{"model": "opus",, // not json\n'
    settings.write_bytes(broken)
    run = install(till)
    assert run.code == 1
    assert run.error["name"] == "hook.invalid_settings"
    assert settings.read_bytes() == broken
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


@pytest.mark.process
def test_install_never_writes_through_a_symlinked_claude_folder(
    till: Till, attached: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-project-claude"
    other.mkdir()
    (attached / ".claude").symlink_to(other)
    run = install(till)
    assert run.code == 1
    assert run.error["name"] == "hook.unsafe_settings_path"
    assert list(other.iterdir()) == []


@pytest.mark.process
def test_install_never_writes_through_a_symlinked_control_folder(
    till: Till, attached: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-control"
    other.mkdir()
    (attached / ".tillage" / "hooks").symlink_to(other)
    run = install(till, "--agent", "generic")
    assert run.code == 1
    assert run.error["name"] == "workspace.unsafe_control_dir"
    assert list(other.iterdir()) == []


@pytest.mark.process
def test_install_needs_an_attached_workspace(till: Till, folder: Path) -> None:
    run = install(till)
    assert run.code == 1
    assert run.error["name"] == "workspace.not_attached"
    assert not (folder / ".claude").exists()


@pytest.mark.process
def test_install_of_an_unknown_harness_is_refused(till: Till, attached: Path) -> None:
    run = install(till, "--agent", "vim")
    assert run.code == 1
    assert run.error["name"] == "invalid_argument"


@pytest.mark.process
def test_generic_scripts_run_from_anywhere_with_agent_and_turn_from_the_environment(
    till: Till, attached: Path, tmp_path: Path
) -> None:
    doc = ok(install(till, "--agent", "generic"))
    folder = attached / ".tillage" / "hooks"
    events = ("pre-turn", "post-tool", "turn-end", "session-end")
    assert doc["installed"] == [str(folder / e) for e in events]
    for name in events:
        assert os.stat(folder / name).st_mode & stat.S_IXUSR
    assert ok(install(till, "--agent", "generic"))["installed"] == []

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (attached / "a.txt").write_text("generic turn")
    env = {**till.env(), "TILLAGE_AGENT": "my agent", "TILLAGE_TURN": "12"}
    run = subprocess.run(
        [str(folder / "turn-end")],
        cwd=elsewhere,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    snap = newest(till)
    assert (snap["trigger"], snap["agent"], snap["turn"]) == ("hook", "my agent", "12")
    assert snap["label"] == 'hook turn-end agent="my agent" turn=12'

    (attached / "a.txt").write_text("a tool ran")
    tool = subprocess.run(
        [str(folder / "post-tool"), "--tool", "make"],
        cwd=elsewhere,
        env=env,
        input=json.dumps(CLAUDE_PAYLOAD),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tool.returncode == 0, tool.stderr
    snap = newest(till)
    assert snap["label"] == 'hook post-tool agent="my agent" turn=12 tool=make'
    assert snap["session"] == CLAUDE_PAYLOAD["session_id"]


@pytest.mark.process
def test_generic_scripts_exit_0_even_when_till_fails(
    till: Till, attached: Path, tmp_path: Path
) -> None:
    ok(install(till, "--agent", "generic"))
    script = attached / ".tillage" / "hooks" / "pre-turn"
    run = subprocess.run(
        [str(script), "--no-such-flag"],
        cwd=tmp_path,
        env=till.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0


@pytest.mark.process
def test_a_session_that_does_not_number_its_turns_is_numbered_by_its_pre_turn_hooks(
    till: Till, attached: Path
) -> None:
    """Claude Code's payload carries no turn: each UserPromptSubmit (pre-turn) of a session
    starts the next turn, and the tool calls and the Stop of that turn carry its number."""

    def claude(event: str, session: str = "s-one") -> dict[str, Any]:
        payload = {"session_id": session, "hook_event_name": event, "cwd": str(attached)}
        if event == "PostToolUse":
            payload["tool_name"] = "Write"
        return dict(ok(hook(till, stdin=json.dumps(payload))))

    turns = []
    for n, event in enumerate(("UserPromptSubmit", "PostToolUse", "Stop") * 2):
        (attached / "a.txt").write_text(f"edit {n}")
        turns.append(claude(event)["turn"])
    assert turns == ["1", "1", "1", "2", "2", "2"]
    assert claude("UserPromptSubmit", session="s-two")["turn"] == "1"
    labels = [s["label"] for s in till.json("timeline", "--session", "s-one")["snapshots"]]
    assert labels[0] == "hook turn-end agent=claude-code turn=2"
    assert (
        ok(hook(till, "turn-end", "--turn", "7", stdin=json.dumps({"session_id": "s-one"})))["turn"]
        == "7"
    )  # a turn the caller names wins
