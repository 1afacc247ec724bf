"""Path globs for claims: parsing, matching a path, and whether two globs can match one path.

A glob is workspace-relative, '/'-separated. In a segment, `*` matches any run of characters
(never `/`), `?` one character, `[abc]`, `[a-z]`, `[!a]` or `[^a]` one character of a class (a
`]` first in the class is literal); any other character is itself (`\\` escapes the next one). A
whole segment `**` matches zero or more segments; `**` inside a segment is `*`. `*` also matches
a leading dot (`*` matches `.env`), as in gitignore.

A claim covers the paths its glob matches; a glob that ends in a plain name (no `*`, `?` or
`[` in its last segment) names a file or a folder, and covers everything in that folder too
(`src` covers `src/a.py`; `src/*` covers `src/a.py` but not `src/a/b.py`: end with `/**` for
every depth): `covers(glob, path)`. A wildcard's last segment does not reach below what it
matches, or `**/*.py` would collide with `docs/*.md` through a folder named `x.md`.

Two claims collide when some path is covered by both: `overlap(a, b)`, decided exactly by
searching the product of the two globs' automata (segment by segment, and character by
character inside a segment), not by sampling paths. `witness(a, b)` returns such a path, so a
caller (and the property test) can see why.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from tillage.errors import InvalidArgumentError, echo

# Lengths above these are refused: a claim pattern is a short glob, not a document.
MAX_PATTERN = 1024
MAX_SEGMENTS = 128

_MIN_CHAR = 1  # a path never holds NUL
_MAX_CHAR = 0x10FFFF
_SLASH = ord("/")


class BadPatternError(InvalidArgumentError):
    """A claim pattern is not a workspace-relative glob (absolute, `..`, empty, unclosed `[`)."""

    name = "claim.bad_pattern"
    module = "claims"
    next_step = "give a workspace-relative glob such as `src/**` or `docs/*.md`"


# -- the parsed form ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CharSet:
    """The characters one item of a segment accepts: a union of closed code-point ranges, or
    its complement; `/` is never in it."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def __contains__(self, code: int) -> bool:
        if code == _SLASH or code < _MIN_CHAR:
            return False
        inside = any(lo <= code <= hi for lo, hi in self.ranges)
        return inside != self.negated

    def edges(self) -> set[int]:
        """The code points where membership can start: a member of an intersection of sets is
        found among the edges of both (plus the smallest character)."""
        out = set()
        for lo, hi in self.ranges:
            out.add(lo)
            out.add(hi + 1)
        return out


ANY = CharSet((), negated=True)  # `?`, and each character `*` consumes


@dataclass(frozen=True)
class Item:
    """One element of a segment glob: a character class (a literal is a class of one), or a
    star (`*`: any run of characters, the empty one included)."""

    chars: CharSet
    star: bool = False


STAR = Item(ANY, star=True)
Segment = tuple[Item, ...]
# A parsed glob: a tuple of segments, where None is a whole-segment `**`.
Parsed = tuple[Segment | None, ...]


def _literal(ch: str) -> Item:
    code = ord(ch)
    return Item(CharSet(((code, code),)))


def _parse_class(text: str, start: int) -> tuple[Item, int]:
    """Parses `[...]` beginning at text[start] == '['; returns the item and the index after it."""
    i = start + 1
    negated = False
    if i < len(text) and text[i] in "!^":
        negated = True
        i += 1
    ranges: list[tuple[int, int]] = []
    first = True
    while i < len(text) and (text[i] != "]" or first):
        first = False
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            i += 1
            ch = text[i]
        lo = ord(ch)
        if i + 2 < len(text) and text[i + 1] == "-" and text[i + 2] != "]":
            hi_ch = text[i + 2]
            step = 3
            if hi_ch == "\\" and i + 3 < len(text):
                hi_ch = text[i + 3]
                step = 4
            hi = ord(hi_ch)
            if hi < lo:
                raise BadPatternError(
                    f"the character range {ch}-{hi_ch} in {echo(text)} runs backwards"
                )
            ranges.append((lo, hi))
            i += step
        else:
            ranges.append((lo, lo))
            i += 1
    if i >= len(text):
        raise BadPatternError(f"{echo(text)} has a `[` that is never closed")
    return Item(CharSet(tuple(ranges), negated)), i + 1


def _parse_segment(text: str) -> Segment:
    items: list[Item] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "*":
            while i < len(text) and text[i] == "*":
                i += 1
            items.append(STAR)
            continue
        if ch == "?":
            items.append(Item(ANY))
        elif ch == "[":
            item, i = _parse_class(text, i)
            items.append(item)
            continue
        elif ch == "\\" and i + 1 < len(text):
            i += 1
            items.append(_literal(text[i]))
        else:
            items.append(_literal(ch))
        i += 1
    return tuple(items)


def normalize(pattern: str) -> str:
    """Returns a claim pattern in its one spelling (no `./`, no doubled or trailing `/`: a
    trailing `/` means the folder, which a claim covers whole anyway), or raises
    BadPatternError for an absolute pattern, a `.`/`..` segment, or an empty one."""
    if not pattern or not pattern.strip():
        raise BadPatternError("a claim pattern cannot be empty")
    if len(pattern) > MAX_PATTERN:
        raise BadPatternError(f"a claim pattern is at most {MAX_PATTERN} characters")
    if "\x00" in pattern:
        raise BadPatternError("a claim pattern cannot hold a NUL character")
    if pattern.startswith("/"):
        raise BadPatternError(
            f"{echo(pattern)} is absolute; claim patterns are relative to the workspace"
        )
    segments = [s for s in pattern.split("/") if s]
    while segments and segments[0] == ".":
        segments.pop(0)
    if not segments:
        raise BadPatternError(f"{echo(pattern)} names no path")
    for seg in segments:
        if seg in (".", ".."):
            raise BadPatternError(
                f"{echo(pattern)} has a {seg!r} segment; name paths inside the workspace"
            )
    if len(segments) > MAX_SEGMENTS:
        raise BadPatternError(f"a claim pattern has at most {MAX_SEGMENTS} segments")
    return "/".join(segments)


def parse(pattern: str) -> Parsed:
    """Parses a normalized glob (see `normalize`) into segments; BadPatternError if malformed."""
    out: list[Segment | None] = []
    for seg in normalize(pattern).split("/"):
        if seg == "**":
            if out and out[-1] is None:
                continue  # `**/**` is `**`
            out.append(None)
        else:
            out.append(_parse_segment(seg))
    return tuple(out)


def _is_name(seg: Segment | None) -> bool:
    """Tells whether a segment glob is a plain name (each item one literal character)."""
    return seg is not None and all(
        not item.star
        and not item.chars.negated
        and len(item.chars.ranges) == 1
        and item.chars.ranges[0][0] == item.chars.ranges[0][1]
        for item in seg
    )


def _covering(parsed: Parsed) -> Parsed:
    """The glob of everything a claim covers: what it matches, and, when it ends in a plain
    name (a file or a folder), everything below that name."""
    return (*parsed, None) if parsed and _is_name(parsed[-1]) else parsed


# -- matching one path -------------------------------------------------------------------------


def _segment_matches(seg: Segment, name: str) -> bool:
    """Tells whether one path segment matches a segment glob (a set of NFA positions)."""
    positions = _closure(seg, {0})
    for ch in name:
        code = ord(ch)
        nxt: set[int] = set()
        for p in positions:
            if p < len(seg) and code in seg[p].chars:
                nxt.add(p if seg[p].star else p + 1)
        positions = _closure(seg, nxt)
        if not positions:
            return False
    return len(seg) in positions


def _closure(seg: Segment, positions: set[int]) -> set[int]:
    """Adds the positions reached by letting stars match nothing."""
    out = set(positions)
    stack = list(positions)
    while stack:
        p = stack.pop()
        if p < len(seg) and seg[p].star and p + 1 not in out:
            out.add(p + 1)
            stack.append(p + 1)
    return out


def _path_matches(parsed: Parsed, names: Sequence[str]) -> bool:
    states = _glob_closure(parsed, {0})
    for name in names:
        nxt: set[int] = set()
        for s in states:
            if s == len(parsed):
                continue
            seg = parsed[s]
            if seg is None:
                nxt.add(s)
            elif _segment_matches(seg, name):
                nxt.add(s + 1)
        states = _glob_closure(parsed, nxt)
        if not states:
            return False
    return len(parsed) in states


def _glob_closure(parsed: Parsed, states: set[int]) -> set[int]:
    out = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        if s < len(parsed) and parsed[s] is None and s + 1 not in out:
            out.add(s + 1)
            stack.append(s + 1)
    return out


def _names(path: str) -> list[str]:
    return [n for n in path.split("/") if n]


def matches(pattern: str, path: str) -> bool:
    """Tells whether the glob matches the workspace path exactly (segment for segment)."""
    names = _names(path)
    return bool(names) and _path_matches(parse(pattern), names)


def covers(pattern: str, path: str) -> bool:
    """Tells whether a claim on `pattern` covers `path`: the glob matches it or a folder above
    it."""
    names = _names(path)
    return bool(names) and _path_matches(_covering(parse(pattern)), names)


# -- two globs at once -------------------------------------------------------------------------


def _common_char(a: CharSet, b: CharSet, *, but: int | None = None) -> int | None:
    """A character both sets accept (other than `but`), or None. The intersection of two finite
    unions of ranges (or their complements) is a union of ranges, each starting at an edge of
    one of them, so trying the edges (and the first characters) is exact, not a sample."""
    preferred = (ord("a"), ord("x"), ord("0"), ord("_"))
    edges = a.edges() | b.edges()
    if but is not None:
        edges.add(but + 1)
    for code in (*preferred, _MIN_CHAR, _SLASH + 1, *sorted(edges)):
        if code != but and _MIN_CHAR <= code <= _MAX_CHAR and code in a and code in b:
            return code
    return None


_DOT = ord(".")
# What has been spelled of a segment name so far, as far as `.` and `..` go (neither is a name
# a path can hold): nothing, ".", "..", or anything else (a name).
_EMPTY, _ONE_DOT, _TWO_DOTS, _NAME = range(4)
_AFTER_DOT = {_EMPTY: _ONE_DOT, _ONE_DOT: _TWO_DOTS, _TWO_DOTS: _NAME, _NAME: _NAME}

_SegState = tuple[int, int, int]


def _segment_witness(a: Segment | None, b: Segment | None) -> str | None:
    """A segment name (not empty, `.` or `..`) both segment globs match (None: `**`, any
    name), or None when there is none: a breadth-first search of the product automaton, with
    parent links so the name found is a shortest one."""
    sa: Segment = (STAR,) if a is None else a
    sb: Segment = (STAR,) if b is None else b
    start: _SegState = (0, 0, _EMPTY)
    parents: dict[_SegState, tuple[_SegState, int | None] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        i, j, spelled = state
        if i == len(sa) and j == len(sb) and spelled == _NAME:
            codes: list[int] = []
            link = parents[state]
            while link is not None:
                prev, code = link
                if code is not None:
                    codes.append(code)
                link = parents[prev]
            return "".join(chr(c) for c in reversed(codes))
        moves: list[tuple[_SegState, int | None]] = []
        if i < len(sa) and sa[i].star:
            moves.append(((i + 1, j, spelled), None))
        if j < len(sb) and sb[j].star:
            moves.append(((i, j + 1, spelled), None))
        if i < len(sa) and j < len(sb):
            ni = i if sa[i].star else i + 1
            nj = j if sb[j].star else j + 1
            if _DOT in sa[i].chars and _DOT in sb[j].chars:
                moves.append(((ni, nj, _AFTER_DOT[spelled]), _DOT))
            code = _common_char(sa[i].chars, sb[j].chars, but=_DOT)
            if code is not None:
                moves.append(((ni, nj, _NAME), code))
        for nxt, code in moves:
            if nxt not in parents:
                parents[nxt] = (state, code)
                queue.append(nxt)
    return None


_GlobState = tuple[int, int, bool]


def _glob_witness(a: Parsed, b: Parsed) -> list[str] | None:
    """A path (as names) both parsed globs match, or None: a breadth-first search over pairs of
    segment positions (and whether a name was spelled yet: the empty path is no path); `**` may
    match no segment (a skip) or one more (staying put)."""
    start: _GlobState = (0, 0, False)
    parents: dict[_GlobState, tuple[_GlobState, str | None] | None] = {start: None}
    queue = deque([start])
    segment_cache: dict[tuple[int, int], str | None] = {}
    while queue:
        state = queue.popleft()
        i, j, nonempty = state
        if i == len(a) and j == len(b) and nonempty:
            names: list[str] = []
            link = parents[state]
            while link is not None:
                prev, name = link
                if name is not None:
                    names.append(name)
                link = parents[prev]
            names.reverse()
            return names
        moves: list[tuple[_GlobState, str | None]] = []
        if i < len(a) and a[i] is None:
            moves.append(((i + 1, j, nonempty), None))
        if j < len(b) and b[j] is None:
            moves.append(((i, j + 1, nonempty), None))
        if i < len(a) and j < len(b):
            if (i, j) not in segment_cache:
                segment_cache[(i, j)] = _segment_witness(a[i], b[j])
            name = segment_cache[(i, j)]
            if name is not None:
                ni = i if a[i] is None else i + 1
                nj = j if b[j] is None else j + 1
                moves.append(((ni, nj, True), name))
        for nxt, name in moves:
            if nxt not in parents:
                parents[nxt] = (state, name)
                queue.append(nxt)
    return None


def witness(a: str, b: str) -> str | None:
    """A workspace path that claims on `a` and on `b` would both cover, or None when no path
    can be covered by both."""
    names = _glob_witness(_covering(parse(a)), _covering(parse(b)))
    return None if names is None else "/".join(names)


def overlap(a: str, b: str) -> bool:
    """Tells whether some path is covered by a claim on `a` and by a claim on `b`."""
    return witness(a, b) is not None


def reaches(pattern: str, path: str) -> bool:
    """Tells whether a claim on `pattern` covers the workspace path `path` or some path below
    it: whether the claim has a say in what becomes of `path` as a folder (the radar's
    collision on a folder removed, or made a file, concerns everything in it). The path is
    taken literally, whatever characters it holds, and may be longer than any pattern."""
    names = _names(path)
    if not names:
        return False
    below: Parsed = (*(tuple(_literal(ch) for ch in name) for name in names), None)
    return _glob_witness(_covering(parse(pattern)), below) is not None
