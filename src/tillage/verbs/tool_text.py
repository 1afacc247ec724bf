"""Results said for a model: short prose with the IDs to pass back, capped in size.

A model reads every byte of a tool result and pays for it, so what goes back is what it needs to
act next: what happened, what changed, the exact call that applies or undoes it, with whole IDs
(a short one could later name another snapshot). Lists stop at TEXT_LIMIT bytes and say how
much they left out; the structured result obeys the same cap (tool_shape.py), and the full
document travels beside both for the harness (ToolResult.document). Pure: values in, text out.
"""

from __future__ import annotations

import json

from tillage.core.units import count, size
from tillage.verbs.tool_shape import MAX_ITEMS, TEXT_LIMIT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from tillage.verbs.tool_defs import ToolDef


def error_text(envelope: dict[str, Any]) -> str:
    """An error as a model reads it (its envelope as tool_shape.shape_error says it): what
    went wrong, its name and code, what to do next."""
    text = f"Error {envelope['name']} ({envelope['code']}): {envelope['message']}"
    if envelope.get("next"):
        text += f"\nNext: {envelope['next']}"
    return cap(text)


def cap(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text` cut to about `limit` bytes at a line end, saying how much was left out."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    cut = kept.rfind("\n")
    if cut > limit // 2:
        kept = kept[:cut]
    left = len(data) - len(kept.encode())
    return f"{kept}\n… {size(left)} more left out (ask for less to see it)."


def fit(head: str, lines: Sequence[str], noun: str, tail: str = "", limit: int = TEXT_LIMIT) -> str:
    """`head`, as many of `lines` as fit in `limit` bytes with `tail`, and a note of how many
    `noun`s (and bytes) were left out."""
    shown = lines[: fitting(head, lines, len(tail.encode()), limit)]
    parts = [head, *shown]
    left = len(lines) - len(shown)
    if left:
        rest = sum(len(line.encode()) + 1 for line in lines[len(shown) :])
        parts.append(f"… {count(left, noun)} more not shown ({size(rest)} left out).")
    if tail:
        parts.append(tail)
    return "\n".join(parts)


def fitting(head: str, lines: Sequence[str], tail_bytes: int, limit: int = TEXT_LIMIT) -> int:
    """How many of `lines` `fit` shows below `head` above a tail of `tail_bytes`."""
    budget = limit - len(head.encode()) - tail_bytes - 80
    used = 0
    for shown, line in enumerate(lines):
        used += len(line.encode()) + 1
        if used > budget:
            return shown
    return len(lines)


def render(
    tool: ToolDef, result: Any, request: Any = None, doc: Any = None, said: Any = None
) -> str:
    """The text a model gets back for `result` of `tool` (asked with `request`); `doc` is
    the result's wire document when the caller has it already, `said` its structured form
    (tool_shape.shape), which a result with no words of its own is answered with."""
    from tillage.verbs.tool_speech import expand_ids, full_ids, speak

    if doc is None:
        from tillage.verbs.wire import to_wire

        doc = to_wire(result)
    own = getattr(result, "model_text", None)
    if callable(own):  # a verb's own words, written beside its people's: said as tools
        return cap(speak(str(own()), tool, full_ids(doc, MAX_ITEMS)))
    renderer = _RENDERERS.get(tool.verb.contract.name)
    if renderer is not None:
        return cap(renderer(doc, request))
    if said is None:
        from tillage.verbs.tool_shape import shape

        said = shape(doc, tool)  # a caller that has not shaped it yet
    if said is None:  # too big even cut: the document's top fields, said as the text says
        said = {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}
    return cap(expand_ids(_generic(tool.name, said), full_ids(doc, MAX_ITEMS)))


def _generic(name: str, doc: Any) -> str:
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return f"{name} answered (JSON):\n{text}"


def snapshot_line(s: dict[str, Any]) -> str:
    """One snapshot on one line: its whole ID, when, why, label, size, and its marks."""
    label = f' "{s["label"]}"' if s.get("label") else ""
    marks = "".join(
        [
            " pinned" if s.get("pinned") else "",
            " PARTIAL" if s.get("grade") == "partial" else "",
        ]
    )
    who = f" agent={s['agent']}" if s.get("agent") else ""
    return (
        f"- {s['id']}  {s['sealed_at']}  {s['trigger']}{label}"
        f"  ({count(s['files'], 'file')}, {size(s['bytes'])}){who}{marks}"
    )


def change_line(c: dict[str, Any]) -> str:
    """One changed path: its kind and sizes."""
    old, new = c.get("old_size"), c.get("new_size")
    sizes = ""
    if old is not None and new is not None and c["kind"] == "modified":
        sizes = f" ({size(old)} → {size(new)})"
    elif new is not None and c["kind"] != "deleted":
        sizes = f" ({size(new)})"
    elif old is not None:
        sizes = f" (was {size(old)})"
    return f"  {c['kind']} {c['path']}{sizes}"


def _snapshots(doc: dict[str, Any], _request: Any) -> str:
    snaps = doc["snapshots"]
    if not snaps:
        return "The timeline has no snapshots matching that."
    head = (
        f"{count(len(snaps), 'snapshot')}, newest first. Each is a state the whole folder "
        "can be restored to, byte for byte:"
    )
    tail = (
        "Pass a snapshot's ID to workspace_restore (as `snapshot`), which previews before it "
        "changes anything."
    )
    if doc.get("more"):
        tail = f"{count(doc['more'], 'older snapshot')} beyond the limit. " + tail
    return fit(head, [snapshot_line(s) for s in snaps], "snapshot", tail)


def _paths_phrase(paths: Any) -> str:
    if not paths:
        return "the whole workspace"
    return "the paths " + ", ".join(str(p) for p in paths) + " (as a whole)"


def _restore(doc: dict[str, Any], request: Any) -> str:
    snap = doc["snapshot"]
    when = f"snapshot {snap['id']} (sealed {snap['sealed_at']}, {snap['trigger']}"
    when += f', "{snap["label"]}")' if snap.get("label") else ")"
    changes = doc["changes"]
    lines = [change_line(c) for c in changes]
    if not changes:
        scope = _paths_phrase(getattr(request, "paths", None))
        return f"Nothing to restore: {scope} already matches {when}. Nothing was changed."
    if not doc["applied"]:
        return fit(
            f"Preview only; nothing was changed. Restoring {when} would change "
            f"{count(len(changes), 'path')}:",
            lines,
            "path",
            "To apply it, call workspace_restore again with the same snapshot and paths and "
            "confirm: true. The present state is sealed first, so the restore can be undone.",
        )
    undo = doc.get("undo")
    tail = (
        f"The state before the restore was sealed first as snapshot {undo}. To undo this "
        f"restore, call workspace_restore with snapshot {undo!r}, the same paths, and "
        "confirm: true."
    )
    rescued = doc.get("rescued") or []
    if rescued:
        tail += f" {count(len(rescued), 'path')} in the way were kept aside: " + ", ".join(
            rescued[:10]
        )
    return fit(f"Restored {when}: {count(len(changes), 'path')} changed:", lines, "path", tail)


def _fork(doc: dict[str, Any], _request: Any) -> str:
    f = doc["fork"]
    made = "Made" if f.get("created") else "Used"
    text = (
        f"{made} fork {f['name']!r} at {f['path']} from snapshot {f['base']}"
        + (f" ({count(f['files'], 'file')}, {size(f['bytes'])})" if f.get("files") else "")
        + ". The workspace itself was not touched."
    )
    if f.get("exit_code") is not None:
        text += f"\nThe command ran in the fork and exited with status {f['exit_code']}."
        if f.get("head"):
            text += f" The fork's state after it was sealed as {f['head']}."
        output = (f.get("output") or "").strip()
        if output:
            text += "\nIts output (the end):\n" + _tail(output, 2000)
    text += (
        f"\nSee what it changed with workspace_diff (target {f['name']!r}); land it with "
        f"workspace_merge (fork {f['name']!r}, a check command, preview first)."
    )
    return text


def _tail(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return "…" + data[-limit:].decode(errors="ignore")


def _merge(doc: dict[str, Any], _request: Any) -> str:
    what = f"fork {doc['fork']!r}" if doc.get("fork") else f"snapshot {doc['theirs']}"
    lines = [change_line(c) for c in doc.get("changed") or []]
    conflicts = doc.get("conflicts") or []
    if doc.get("into_fork"):
        done = "would change" if doc.get("dry_run") else "changed"
        left = [f"  {c['path']} ({c['kind']}: {c.get('reason', '')})" for c in conflicts]
        return fit(
            f"Merging the workspace into {what} {done} {count(len(lines), 'path')} there; "
            f"the workspace was not changed. Left to settle: {len(conflicts)}.",
            left,
            "conflict",
            "Remove the conflict markers from those files in the fork; settle the others with "
            'take (e.g. ["theirs", "PATH"]) when you call workspace_merge to land the fork.'
            if conflicts
            else "Call workspace_merge for the fork to land its work.",
        )
    if conflicts:
        return fit(
            f"Nothing landed: merging {what} has {count(len(conflicts), 'conflicting path')}, "
            "changed on both sides:",
            [f"  {c['path']} ({c['kind']}: {c.get('reason', '')})" for c in conflicts],
            "conflict",
            "The workspace was not changed. To resolve them: call workspace_merge with "
            "into_fork true (writes the merge into the fork, text conflicts with markers), or "
            'settle paths with take, e.g. ["theirs", "PATH"] or ["ours", "PATH"].',
        )
    if doc.get("check_failed"):
        output = (doc.get("check_output") or "").strip()
        return (
            f"Nothing landed: the check failed on the merged result of {what} "
            f"(exit status {doc.get('check_exit_code')}). The workspace was not changed."
            + (f"\nThe check's output (the end):\n{_tail(output, 2500)}" if output else "")
        )
    if doc.get("dry_run"):
        if not lines:
            return f"Preview: merging {what} would change nothing."
        return fit(
            f"Preview only; nothing was changed. Merging {what} would change "
            f"{count(len(lines), 'path')}:",
            lines,
            "path",
            "Call workspace_merge with preview false (and a check command) to land it; give "
            f"expect {doc.get('preview_digest')!r} to land exactly this plan.",
        )
    if not doc.get("landed"):
        return f"Merging {what} changed nothing: the workspace already has its changes."
    tail = f"Sealed the result as snapshot {doc.get('result')}."
    if doc.get("check_output") is not None:
        tail += " The check passed."
    if doc.get("undo"):
        tail += (
            f" To undo the merge, call workspace_restore with snapshot {doc['undo']!r} and "
            "confirm: true."
        )
    return fit(f"Merged {what}: {count(len(lines), 'path')} landed:", lines, "path", tail)


def _diff(doc: dict[str, Any], _request: Any) -> str:
    changes = doc["changes"]
    if not changes:
        return "No differences."
    lines = [change_line(c) for c in changes]
    stat = doc.get("stat")
    if stat:
        counts = {f["path"]: f for f in stat["files"]}
        lines = [
            line + _lines_phrase(counts.get(c["path"]))
            for line, c in zip(lines, changes, strict=True)
        ]
    for patch in doc.get("patches") or []:
        lines.append(
            patch["text"] if patch["text"] is not None else f"{patch['path']}: {patch['note']}"
        )
    return fit(f"{count(len(changes), 'changed path')}:", lines, "line")


def _lines_phrase(counted: dict[str, Any] | None) -> str:
    if counted is None:
        return ""
    if counted["insertions"] is None:
        return f", {counted['note']}"
    return f", +{counted['insertions']} -{counted['deletions']} lines"


def _ls(doc: dict[str, Any], _request: Any) -> str:
    entries = doc["entries"]
    if not entries:
        return "Nothing there."
    lines = [
        f"  {e['kind']} {e['path']}"
        + (f" -> {e['target']}" if e["target"] is not None else "")
        + (f" ({size(e['size'])})" if e["size"] is not None and e["kind"] == "file" else "")
        for e in entries
    ]
    tail = ""
    if doc.get("more"):
        left = count(doc["more"], "more entry", "more entries")
        tail = f"{left}: ask again with after={doc['next_after']!r}."
    return fit(f"{count(len(entries), 'entry', 'entries')}:", lines, "entry", tail)


def _snap(doc: dict[str, Any], _request: Any) -> str:
    s = doc["snapshot"]
    return (
        f"Sealed snapshot {s['id']} ({count(s['files'], 'file')}, {size(s['bytes'])}) at "
        f"{s['sealed_at']}. The folder can be restored to it with workspace_restore."
    )


def _status(doc: dict[str, Any], _request: Any) -> str:
    head = doc.get("head")
    lines = [
        f"Workspace {doc.get('workspace')}: attached, "
        + (
            "a watcher is sealing changes as they happen."
            if doc.get("watching")
            else "no watcher running (the timeline moves only when something seals)."
        ),
        f"{count(doc.get('snapshots') or 0, 'snapshot')} in the timeline.",
    ]
    if head:
        lines.append("Newest: " + snapshot_line(head)[2:])
    folder = doc.get("folder") or {}
    if folder.get("differs") is not None:
        lines.append(
            f"The folder: {count(folder['differs'], 'path')} differ from the newest snapshot"
            + (" (workspace_diff lists them)." if folder["differs"] else ".")
        )
    fidelity = doc.get("fidelity") or []
    if fidelity:
        lines.append(f"{count(len(fidelity), 'path')} not captured exactly:")
        lines += [f"  {f['path']}: {f['reason']}" for f in fidelity]
    return "\n".join(lines)


def _cat(doc: dict[str, Any], _request: Any) -> str:
    import base64

    data = base64.b64decode(doc["content_base64"])
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return (
            f"{doc['path']} is a binary file of {size(doc['size'])}; its bytes are not shown "
            "as text."
        )
    head = f"{doc['path']} ({size(doc['size'])}) as it was in that snapshot:\n"
    if doc.get("truncated"):
        text += f"\n… the rest of the file ({size(doc['size'] - len(data))}) is not shown."
    return head + text


def _events(doc: dict[str, Any], _request: Any) -> str:
    events = doc["events"]
    if not events:
        return "No events."
    lines = [
        f"- cursor {e['cursor']}  {e['at']}  {e['kind']}  "
        + json.dumps(_without_short(e["detail"]), ensure_ascii=False, separators=(",", ":"))
        for e in events
    ]
    head = f"{count(len(events), 'event')}, oldest first:"
    # The cursor to pass on is the last one shown: those cut are read by the next call.
    shown = max(1, fitting(head, lines, 120))
    last = events[shown - 1]["cursor"]
    rest = "the rest" if shown < len(events) else "only newer events"
    return fit(head, lines, "event", f"Pass after: {last} next time to read {rest}.")


def _without_short(value: Any) -> Any:
    """`value` without its `short` IDs: a model is handed whole ones only."""
    if isinstance(value, dict):
        return {k: _without_short(v) for k, v in value.items() if k != "short"}
    if isinstance(value, list):
        return [_without_short(v) for v in value]
    return value


def _try(doc: dict[str, Any], _request: Any) -> str:
    before, after = doc["before"], doc["after"]
    output = (doc.get("output") or "").strip()
    return (
        f"Ran the command in the workspace itself: exit status {doc['exit_code']}. The folder "
        f"was sealed before ({before['id']}) and after ({after['id']})."
        + (f"\nIts output (the end):\n{_tail(output, 2500)}" if output else "")
        + f"\nTo undo the attempt, call workspace_restore with snapshot {before['id']!r} and "
        "confirm: true."
    )


def _exec(doc: dict[str, Any], _request: Any) -> str:
    universes = doc.get("universes") or []
    if not universes:
        return _generic("workspace_exec", doc)
    failed = [u for u in universes if u["exit_code"] != 0]
    lines = []
    for u in universes:
        line = f"- {u['fork']}: exit {u['exit_code']} (port {u['port']}) at {u['path']}"
        output = (u.get("output") or "").strip()
        if output:
            line += "\n    " + _tail(output, 300).replace("\n", "\n    ")
        lines.append(line)
    head = (
        f"Ran the command in {count(len(universes), 'universe')}; "
        f"{len(failed)} failed, {len(universes) - len(failed)} passed:"
    )
    return fit(
        head,
        lines,
        "universe",
        "The workspace itself was not touched. Land one with workspace_merge (fork NAME).",
    )


def _radar(doc: dict[str, Any], _request: Any) -> str:
    conflicts = doc["conflicts"]
    if not conflicts:
        scanned = count(doc["forks_scanned"], "fork")
        return f"No path is changed in more than one place ({scanned} compared)."
    lines = []
    for c in conflicts:
        places = list(c["forks"]) + (["the workspace"] if c.get("workspace") else [])
        owners = ", ".join(x.get("owner", "") for x in c.get("claimed_by") or [])
        held = "contested: " if c.get("claim") == "contested" else ""
        lines.append(
            f"  {c['path']}: {', '.join(places)}"
            + (f" ({held}claimed by {owners})" if owners else "")
        )
    return fit(
        f"{count(len(conflicts), 'path')} changed in more than one place (merging them will "
        "conflict unless the edits are in different lines):",
        lines,
        "path",
    )


_RENDERERS: dict[str, Callable[[dict[str, Any], Any], str]] = {
    "fork.run": _fork,
    "fork.exec": _exec,
    "try.run": _try,
    "radar.scan": _radar,
    "timeline.cat": _cat,
    "workspace.events": _events,
    "timeline.list": _snapshots,
    "workspace.rewind": _restore,
    "fork.create": _fork,
    "merge.apply": _merge,
    "timeline.diff": _diff,
    "timeline.ls": _ls,
    "timeline.snap": _snap,
    "workspace.status": _status,
}
