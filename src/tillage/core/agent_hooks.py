"""Agent-turn hooks as values: reading a harness's payload, the label, and merging settings.

Pure: the payload is text in, attribution out; Claude Code's settings are a parsed document in
and a merged document out. The file work (locks, atomic writes, symlink refusals) lives in
tillage.features.hooks.hooks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The boundaries a hook marks, and the harness events that fire them: a session's turn starts,
# a tool ran, the turn ended, the session ended (Claude Code's SessionEnd: its changelog ends).
EVENTS = ("pre-turn", "post-tool", "turn-end", "session-end")
CLAUDE_EVENTS = {
    "UserPromptSubmit": "pre-turn",
    "PostToolUse": "post-tool",
    "Stop": "turn-end",
    "SessionEnd": "session-end",
}
CLAUDE_AGENT = "claude-code"
# Where Claude Code says the project is, in the environment of every hook it runs: the command
# names it instead of an absolute path, so a settings file committed to git works in every
# checkout (the shell expands it; Claude Code runs hook commands through one).
PROJECT_DIR = '"$CLAUDE_PROJECT_DIR"'
# PostToolUse fires after every tool; only these can change files (anything else, an MCP tool
# included, is caught by the turn-end seal). A read-only tool then costs the agent nothing.
CLAUDE_WRITE_TOOLS = "Bash|Edit|MultiEdit|Write|NotebookEdit"
HARNESSES = (CLAUDE_AGENT, "generic")

FIELD_LIMIT = 200  # a payload's session or tool name longer than this is cut: it is a label


@dataclass(frozen=True)
class Payload:
    """What a harness's stdin document says about the call; every field may be missing."""

    event: str | None = None
    agent: str | None = None
    session: str | None = None
    tool: str | None = None
    reason: str | None = None  # why the session ended (Claude Code's SessionEnd `reason`)
    problem: str | None = None  # why the payload was ignored, when it was


def _text(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:FIELD_LIMIT]


def read_payload(text: str | None) -> Payload:
    """Reads a harness's JSON payload; anything that is not a JSON object is ignored, never an
    error (a hook must not break the agent over what its harness pipes in)."""
    if text is None or not text.strip():
        return Payload()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = _leading_fields(text)
        if not doc:
            return Payload(problem="the payload on stdin is not JSON; it was ignored")
    if not isinstance(doc, dict):
        return Payload(problem="the payload on stdin is not a JSON object; it was ignored")
    harness_event = _text(doc.get("hook_event_name"))
    looks_like_claude = harness_event is not None and "session_id" in doc
    return Payload(
        event=CLAUDE_EVENTS.get(harness_event or ""),
        agent=CLAUDE_AGENT if looks_like_claude else None,
        session=_text(doc.get("session_id")),
        tool=_text(doc.get("tool_name")),
        reason=_text(doc.get("reason")) if harness_event == "SessionEnd" else None,
    )


def _leading_fields(text: str) -> dict[str, Any]:
    """The top-level fields of a JSON object cut short (a harness's payload past the host's
    size cap: Claude Code puts `session_id` and `hook_event_name` before the tool's output),
    up to the first one that is cut; {} when the text does not start as an object."""
    decoder = json.JSONDecoder()
    fields: dict[str, Any] = {}
    i = len(text) - len(text.lstrip())
    if not text.startswith("{", i):
        return fields
    i += 1
    try:
        while True:
            i = _skip_space(text, i)
            key, i = decoder.raw_decode(text, i)
            i = _skip_space(text, i)
            if not isinstance(key, str) or not text.startswith(":", i):
                return fields
            value, i = decoder.raw_decode(text, _skip_space(text, i + 1))
            fields[key] = value
            i = _skip_space(text, i)
            if not text.startswith(",", i):
                return fields
            i += 1
    except ValueError:
        return fields


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _token(value: str) -> str:
    """A label value, quoted when it would blur into the next key=value pair."""
    if any(ch.isspace() or ch in '="' for ch in value):
        return json.dumps(value, ensure_ascii=False)
    return value


def hook_label(
    event: str,
    agent: str | None,
    turn: str | None,
    tool: str | None,
    reason: str | None = None,
) -> str:
    """The snapshot label: `hook turn-end agent=A turn=T` (plus `tool=X`, or a session-end's
    `reason=R`, when known); a part that is not known is left out, never spelled as a
    placeholder."""
    parts = ["hook", event]
    pairs = (("agent", agent), ("turn", turn), ("tool", tool), ("reason", reason))
    for key, value in pairs:
        if value is not None:
            parts.append(f"{key}={_token(value)}")
    return " ".join(parts)


class SettingsShapeError(ValueError):
    """The settings document parses but is not shaped as Claude Code's schema says."""


def hook_command(till: tuple[str, ...], event: str) -> str:
    """The shell command Claude Code runs for `event`: `till` (a bare name found on PATH, or
    an absolute path) on the folder Claude Code names in CLAUDE_PROJECT_DIR, so it works from
    any working directory and names no path of this machine's; stdout discarded, because
    Claude Code adds a UserPromptSubmit hook's stdout to the prompt."""
    import shlex

    words = [shlex.quote(w) for w in till]
    return " ".join([*words, "--repo", PROJECT_DIR, "hook", event]) + " >/dev/null"


def _is_ours(command: Any, event: str) -> bool:
    """Whether a settings command is one tillage wrote for `event` (perhaps with another
    `till`'s path, or another checkout's folder, as in a settings file shared through git):
    an install replaces it rather than adding a second."""
    import shlex

    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if program != "till" and words[1:3] != ["-m", "tillage"]:
        return False
    return any(
        words[i] == "--repo" and words[i + 2 : i + 4] == ["hook", event]
        for i in range(len(words) - 3)
    )


def merge_claude_settings(doc: Mapping[str, Any], commands: Mapping[str, str]) -> Any:
    """Returns Claude Code settings with tillage's hooks in and every other setting and hook
    kept; `commands` maps a harness event to the command for it. Merging the result again
    returns an equal document (install is idempotent). A hook the user moved under another
    matcher stays where it is; an older tillage entry (another `till`, another folder) is
    replaced."""
    import copy

    out = copy.deepcopy(dict(doc))
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsShapeError('"hooks" is not an object')
    for harness_event, command in commands.items():
        event = CLAUDE_EVENTS[harness_event]
        groups = hooks.setdefault(harness_event, [])
        if not isinstance(groups, list):
            raise SettingsShapeError(f'"hooks.{harness_event}" is not a list')
        entries = [
            h
            for g in groups
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            for h in g["hooks"]
        ]
        if any(isinstance(h, dict) and h.get("command") == command for h in entries):
            continue
        kept = _without_ours(groups, event)
        group_doc: dict[str, Any] = {}
        if harness_event == "PostToolUse":
            group_doc["matcher"] = CLAUDE_WRITE_TOOLS
        group_doc["hooks"] = [{"type": "command", "command": command}]
        kept.append(group_doc)
        hooks[harness_event] = kept
    return out


def _without_ours(groups: list[Any], event: str) -> list[Any]:
    """`groups` less tillage's entries for `event`; a group that held only those goes."""
    kept: list[Any] = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            inner = [
                h
                for h in group["hooks"]
                if not (isinstance(h, dict) and _is_ours(h.get("command"), event))
            ]
            if not inner and group["hooks"]:
                continue  # a group that held only a tillage hook
            group["hooks"] = inner
        kept.append(group)
    return kept


def unmerge_claude_settings(doc: Mapping[str, Any]) -> Any:
    """Returns Claude Code settings without tillage's hooks (any `till`, any folder) and with
    everything else as it was: an event whose list held only ours goes, and so does `hooks`
    when it held nothing else; a document without our hooks comes back equal."""
    import copy

    out = copy.deepcopy(dict(doc))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for harness_event, event in CLAUDE_EVENTS.items():
        groups = hooks.get(harness_event)
        if not isinstance(groups, list) or not groups:
            continue
        kept = _without_ours(groups, event)
        if kept == groups:
            continue
        if kept:
            hooks[harness_event] = kept
        else:
            del hooks[harness_event]
    if not hooks and doc.get("hooks"):
        del out["hooks"]
    return out


def json_indent(text: str) -> str:
    """The indentation a JSON document's author used (two spaces when it shows none), so a
    merge keeps the file looking as they wrote it."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)]
    return "  "


GENERIC_HEADER = "#!/bin/sh\n# tillage agent hook ("


def generic_script(till: tuple[str, ...], root: str, event: str) -> str:
    """A POSIX sh hook for any harness: runs from any working directory, takes the agent and
    turn from TILLAGE_AGENT / TILLAGE_TURN, passes stdin and its own arguments on, and always
    exits 0 (a hook must never block the agent)."""
    import shlex

    call = " ".join(shlex.quote(w) for w in (*till, "--repo", root, "hook", event))
    return (
        f"{GENERIC_HEADER}{event}): seals an attributed restore point of\n"
        f"# {root}.\n"
        "# Written by `till hook install --agent generic`; works from any working directory.\n"
        "# Agent and turn: TILLAGE_AGENT, TILLAGE_TURN (arguments given here win). A harness's\n"
        "# JSON on stdin is passed on. Always exits 0: a hook never blocks the agent.\n"
        'if [ -n "${TILLAGE_TURN:-}" ]; then set -- --turn "$TILLAGE_TURN" "$@"; fi\n'
        'if [ -n "${TILLAGE_AGENT:-}" ]; then set -- --agent "$TILLAGE_AGENT" "$@"; fi\n'
        f'{call} "$@" || :\n'
        "exit 0\n"
    )
