"""Three-way line merge of text files (the pure half of `till merge`), on top of merge3.

Bytes in, bytes out: lines are split on b"\\n" and keep their ends, so CRLF files, odd
encodings of line ends and any byte the file holds come back exactly. Two known edge cases of a
line merge are handled here, not left to merge3:

- A last line without a newline: `b"x"` and `b"x\\n"` are different lines to merge3, so a
  side that appends after an unterminated last line would collide with any edit of that line
  by the other side. Each text is merged as if it ended with a newline, and whether the result
  has one is merged on its own, three-way (the side that changed it wins).
- Empty files: no lines at all; an empty base with two different additions is a conflict,
  never a concatenation.

A merge that would need conflict markers is reported as a conflict (`merged` is None); only
`with_markers`, asked for by `merge --into-fork` (which writes into the fork, never into the
workspace), writes them, git-style with the base section as in diff3. Files that are not text
(a NUL byte, or not UTF-8), and files too large to merge line by line, are not merged.
"""

from __future__ import annotations

from dataclasses import dataclass

# Past this many bytes on any side, a file is not merged line by line (difflib's matcher is
# quadratic in the worst case): it is a conflict, said so in its reason.
MAX_MERGE_BYTES = 8 << 20


@dataclass(frozen=True)
class TextMerge:
    """The outcome of merging one file: the merged bytes, or None and why not."""

    merged: bytes | None
    # Conflicting regions found (0 when merged).
    conflicts: int = 0
    # Why it did not merge: "binary", "too_large" or "overlap"; None when it merged.
    reason: str | None = None


def is_text(data: bytes) -> bool:
    """Tells whether bytes are text a line merge may touch: no NUL byte, valid UTF-8."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def split_lines(data: bytes) -> list[bytes]:
    """Splits bytes into lines that keep their b"\\n" (the last one may lack it)."""
    if not data:
        return []
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _lacks_newline(data: bytes) -> bool:
    return bool(data) and not data.endswith(b"\n")


def _terminated(data: bytes) -> list[bytes]:
    """The lines of `data`, its last one given a newline if it lacks one."""
    lines = split_lines(data)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    return lines


def merge_text(base: bytes, ours: bytes, theirs: bytes) -> TextMerge:
    """Merges the changes base→ours and base→theirs, line by line.

    Identical changes converge; changes in different places merge; changes to the same lines
    (or to adjacent ones, where no unchanged line separates them) are a conflict.
    """
    if ours == theirs:
        return TextMerge(ours)
    if base == ours:
        return TextMerge(theirs)
    if base == theirs:
        return TextMerge(ours)
    if max(len(base), len(ours), len(theirs)) > MAX_MERGE_BYTES:
        return TextMerge(None, 1, "too_large")
    if not (is_text(base) and is_text(ours) and is_text(theirs)):
        return TextMerge(None, 1, "binary")
    from merge3 import Merge3

    out: list[bytes] = []
    conflicts = 0
    merger = Merge3(_terminated(base), _terminated(ours), _terminated(theirs))
    for group in merger.merge_groups():
        if group[0] == "conflict":
            conflicts += 1
        else:
            out.extend(group[1])
    if conflicts:
        return TextMerge(None, conflicts, "overlap")
    merged = b"".join(out)
    # Whether the result ends with a newline is merged as a three-way bit of its own.
    base_bit, ours_bit = _lacks_newline(base), _lacks_newline(ours)
    lacks = ours_bit if ours_bit != base_bit else _lacks_newline(theirs)
    if lacks and merged.endswith(b"\n"):
        merged = merged[:-1]
    return TextMerge(merged)


START_MARKER = b"<<<<<<<"
BASE_MARKER = b"|||||||"
MID_MARKER = b"======="
END_MARKER = b">>>>>>>"


def with_markers(
    base: bytes, ours: bytes, theirs: bytes, ours_name: str, theirs_name: str
) -> bytes:
    """The three-way merge of text with every overlapping change written out between git-style
    markers: `<<<<<<< ours_name`, ours' lines, `||||||| base`, the base's, `=======`, theirs',
    `>>>>>>> theirs_name`; the changes that do not overlap are merged as merge_text does."""
    from merge3 import Merge3

    merger = Merge3(_terminated(base), _terminated(ours), _terminated(theirs))
    lines = merger.merge_lines(
        name_a=ours_name.encode(),
        name_b=theirs_name.encode(),
        name_base=b"base",
        start_marker=START_MARKER,
        mid_marker=MID_MARKER,
        end_marker=END_MARKER,
        base_marker=BASE_MARKER,
    )
    return b"".join(lines)


def has_markers(data: bytes) -> bool:
    """Tells whether text still holds a conflict written by with_markers (a start and an end
    marker line)."""
    starts = data.startswith(START_MARKER + b" ") or b"\n" + START_MARKER + b" " in data
    return starts and (data.startswith(END_MARKER + b" ") or b"\n" + END_MARKER + b" " in data)
