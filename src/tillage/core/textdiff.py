"""Line diffs of one file's two versions for `till diff -p` and `--stat`: git's unified format
and its counts, from bytes to text (pure).

A version holding a NUL byte in its first 8,000 bytes is binary, as git decides: it is counted
as changed, never shown line by line. Text is read as UTF-8 (a byte that is not is shown as
U+FFFD in the patch; the counts are of lines, so they are exact either way). "\\ No newline at
end of file" marks a last line without one, as in git, so a patch tells a missing newline
apart.
"""

from __future__ import annotations

from dataclasses import dataclass

BINARY_SNIFF = 8000  # git's window for the NUL test
CONTEXT = 3  # lines of context around each hunk, as git's default
_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class LineDiff:
    """One file's line changes: lines added and removed, and the unified diff (empty when the
    two versions are the same bytes)."""

    insertions: int
    deletions: int
    text: str


def is_binary(data: bytes) -> bool:
    """Tells whether `data` is binary by git's test: a NUL byte within the first 8,000."""
    return b"\0" in data[:BINARY_SNIFF]


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def _range(start: int, count: int) -> str:
    """A hunk header's range, as git writes it: `-3` for one line, `-3,0` for none."""
    if count == 1:
        return str(start + 1)
    return f"{start + 1 if count else start},{count}"


def _line(tag: str, text: str) -> str:
    if text.endswith("\n") or text.endswith("\r\n"):
        return tag + text
    return tag + text + "\n" + _NO_NEWLINE


def line_diff(old: bytes, new: bytes, old_name: str, new_name: str) -> LineDiff:
    """Returns the line diff from `old` to `new` (both text), its headers naming the two sides
    (`a/PATH`, `b/PATH`, or `/dev/null` for a side that does not exist)."""
    from difflib import SequenceMatcher

    a, b = _lines(old), _lines(new)
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    insertions = deletions = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            deletions += i2 - i1
            insertions += j2 - j1
    if not insertions and not deletions:
        return LineDiff(0, 0, "")
    out = [f"--- {old_name}\n", f"+++ {new_name}\n"]
    for group in matcher.get_grouped_opcodes(CONTEXT):
        first, last = group[0], group[-1]
        out.append(
            f"@@ -{_range(first[1], last[2] - first[1])} "
            f"+{_range(first[3], last[4] - first[3])} @@\n"
        )
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                out.extend(_line(" ", t) for t in a[i1:i2])
                continue
            out.extend(_line("-", t) for t in a[i1:i2])
            out.extend(_line("+", t) for t in b[j1:j2])
    return LineDiff(insertions, deletions, "".join(out))
