"""The structured result a model reads: the result's document cut to the text's cap, in the
text's words.

Some clients (Claude Code) hand a model a tool's `structuredContent` in place of its text, so
that document obeys what the text does: at most about TEXT_LIMIT bytes of JSON, lists cut from
their end with `left_out` saying how many of each went (`{"snapshots": 80}`, by the list's
dotted path), long outputs kept by their end, a file's bytes as the text that shows them (never
base64), whole IDs only (no `short`), no null fields, and every next step said as a tool call
(tool_speech).
The whole document stays with the harness (ToolResult.document). Pure: values in, values out.
"""

from __future__ import annotations

import json

from tillage.verbs.tool_speech import expand_ids, full_ids, speak

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.verbs.tool_defs import ToolDef

# About this many bytes go back to a model per call: the text, and the structured result.
TEXT_LIMIT = 4000
# Fields that say what to do next, in the command line's words: said as tool calls.
SPOKEN = frozenset({"next", "undo_command", "next_step", "hint"})
# Fields holding what a command printed or a person wrote: kept as they are (their end).
PRINTED = frozenset({"output", "check_output", "stdout", "stderr", "value"})
# A field for people only: the 12-character form of an ID that is beside it whole.
SHORT = "short"
# A string longer than this (a command's output) keeps its end only.
STRING_LIMIT = 1500
# No list longer than this fits in TEXT_LIMIT (each item costs a few bytes at least): the rest
# is counted, never said.
MAX_ITEMS = TEXT_LIMIT // 4
# What `left_out` and the cut of lists may add beyond the lists they cut.
SLACK = 200


def shape(doc: Any, tool: ToolDef | None, limit: int = TEXT_LIMIT) -> dict[str, Any] | None:
    """`doc` (a result's or an error's wire document) as a model reads it, within `limit`
    bytes of JSON; None when even cut it would not fit (the text alone answers)."""
    if not isinstance(doc, dict):
        doc = {"result": doc}
    known = full_ids(doc, MAX_ITEMS)
    for longest in (STRING_LIMIT, STRING_LIMIT // 5):
        left: dict[str, int] = {}
        said = _said(doc, _Saying(tool, known, longest, left), "")
        assert isinstance(said, dict)
        for path, count in _cut(said, limit - SLACK).items():
            left[path] = left.get(path, 0) + count
        if left:
            said["left_out"] = left
        if _size(said) <= limit:
            return said
    return None


def shape_error(envelope: dict[str, Any], tool: ToolDef | None) -> dict[str, Any]:
    """An error's envelope as a model reads it: its code, name and details as every door
    has them, its message and next step in the tools' words, within the cap."""
    known = full_ids(envelope)
    said = {**envelope, "message": speak(envelope.get("message") or "", tool, known)}
    shaped = shape({"error": said}, tool)  # its `next` is said there
    if shaped is not None:
        return shaped
    said["next"] = speak(said["next"], tool, known) if said.get("next") else None
    return {"error": {k: said[k] for k in ("code", "name", "message", "next")}}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


class _Saying:
    """What saying a document needs: the tool, the whole IDs it holds, the longest string
    kept, and the lists cut so far (by path)."""

    __slots__ = ("known", "left", "longest", "tool")

    def __init__(
        self, tool: ToolDef | None, known: tuple[str, ...], longest: int, left: dict[str, int]
    ) -> None:
        self.tool = tool
        self.known = known
        self.longest = longest
        self.left = left


def _said(value: Any, saying: _Saying, path: str) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if (key == SHORT and isinstance(item, str)) or item is None:
                continue  # a model reads every byte: no short form, no nulls
            if key == "content_base64" and isinstance(item, str):
                out.update(_content(value, item))
                continue
            if key in SPOKEN and isinstance(item, str):
                out[key] = _tail(speak(item, saying.tool, saying.known), saying.longest)
            elif key in PRINTED and isinstance(item, str):
                out[key] = _tail(item, saying.longest)
            else:
                out[key] = _said(item, saying, f"{path}.{key}" if path else key)
        if "content_left_out_bytes" in out:  # what the model reads of the file is cut
            out["truncated"] = True
        return out
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:  # more than could ever fit: not said at all
            saying.left[path] = saying.left.get(path, 0) + len(value) - MAX_ITEMS
            value = value[:MAX_ITEMS]
        return [_said(v, saying, path + "[]") for v in value]
    if isinstance(value, str):  # tillage's words (a label it wrote): its IDs written whole
        known = saying.known
        return _tail(expand_ids(value, known) if known else value, saying.longest)
    return value


def _content(doc: dict[str, Any], encoded: str) -> dict[str, Any]:
    """A file's base64 as the model reads it: its text from the start (cut to fit), or a note
    that it is binary. Never the base64: a third larger, and unreadable."""
    import base64

    data = base64.b64decode(encoded)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return {"binary": True}
    budget = TEXT_LIMIT - SLACK - 2 * len(str(doc.get("path", "")).encode()) - 100
    kept = text.encode()[:budget].decode(errors="ignore")
    out: dict[str, Any] = {"content": kept}
    if len(kept.encode()) < doc.get("size", len(data)):
        out["content_left_out_bytes"] = int(doc.get("size", len(data))) - len(kept.encode())
    return out


def _tail(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return "…" + data[-limit:].decode(errors="ignore")


def _cut(doc: dict[str, Any], budget: int) -> dict[str, int]:
    """Cuts the lists of `doc` in place, the longest first, from their end, until it fits
    `budget` bytes; returns how many items of each list (by dotted path) were left out."""
    left: dict[str, int] = {}
    while _size(doc) > budget:
        lists = [(path, items) for path, items in _lists(doc, "") if items]
        if not lists:
            break
        # The longest list that weighs (a tenth of the whole or more) goes first: a list of
        # 200 paths is cut before the list of 2 forks that holds it.
        total = _size(doc)
        heavy = [pair for pair in lists if _size(pair[1]) * 10 >= total] or lists
        path, items = max(heavy, key=lambda pair: (len(pair[1]), _size(pair[1])))
        excess = _size(doc) - budget
        dropped = 0
        while items and excess > 0:
            excess -= _size(items.pop()) + 1
            dropped += 1
        left[path] = left.get(path, 0) + dropped
    return left


def _lists(value: Any, path: str) -> list[tuple[str, list[Any]]]:
    found: list[tuple[str, list[Any]]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _lists(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        found.append((path, value))
        for item in value:
            found += _lists(item, path + "[]")
    return found
