"""Three-way text merge (core.textmerge): what merges, what conflicts, and the edge cases."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.textmerge import MAX_MERGE_BYTES, is_text, merge_text, split_lines

WORDS = st.text(alphabet="abcxyz é", min_size=0, max_size=6)


def _text(lines: list[str], *, newline: bool, eol: str = "\n") -> bytes:
    body = eol.join(lines)
    return (body + (eol if newline and lines else "")).encode()


@st.composite
def edits(draw: st.DrawFn) -> tuple[list[str], set[int], set[int]]:
    """Base lines (distinct, so the diff is unambiguous) and two sets of lines to change, kept
    apart by at least one untouched line."""
    n = draw(st.integers(3, 12))
    base = [f"line {i}" for i in range(n)]
    ours: set[int] = set()
    theirs: set[int] = set()
    for i in range(n):
        side = draw(st.sampled_from(["", "", "o", "t"]))
        near = {i - 1, i + 1}
        if side == "o" and not near & theirs:
            ours.add(i)
        elif side == "t" and not near & ours:
            theirs.add(i)
    return base, ours, theirs


@examples(150)
@given(edits(), st.booleans(), st.sampled_from(["\n", "\r\n"]))
def test_edits_in_different_places_merge_into_both(
    case: tuple[list[str], set[int], set[int]], newline: bool, eol: str
) -> None:
    base, ours_at, theirs_at = case
    ours = [f"{line} ours" if i in ours_at else line for i, line in enumerate(base)]
    theirs = [f"{line} theirs" if i in theirs_at else line for i, line in enumerate(base)]
    want = [
        f"{line} ours" if i in ours_at else f"{line} theirs" if i in theirs_at else line
        for i, line in enumerate(base)
    ]
    result = merge_text(
        _text(base, newline=newline, eol=eol),
        _text(ours, newline=newline, eol=eol),
        _text(theirs, newline=newline, eol=eol),
    )
    assert result.merged == _text(want, newline=newline, eol=eol)
    assert result.reason is None and result.conflicts == 0


@examples(100)
@given(st.lists(WORDS, min_size=0, max_size=8), st.lists(WORDS, max_size=8), st.booleans())
def test_identical_changes_converge_and_one_sided_changes_win(
    base: list[str], changed: list[str], newline: bool
) -> None:
    b = _text(base, newline=newline)
    c = _text(changed, newline=not newline)
    assert merge_text(b, c, c).merged == c
    assert merge_text(b, b, c).merged == c
    assert merge_text(b, c, b).merged == c


@examples(100)
@given(edits(), st.booleans())
def test_merging_is_symmetric(case: tuple[list[str], set[int], set[int]], newline: bool) -> None:
    base, ours_at, theirs_at = case
    ours = [f"{x}!" if i in ours_at else x for i, x in enumerate(base)]
    theirs = [f"{x}?" if i in theirs_at else x for i, x in enumerate(base)]
    b, o, t = (_text(x, newline=newline) for x in (base, ours, theirs))
    assert merge_text(b, o, t).merged == merge_text(b, t, o).merged


@examples(60)
@given(st.integers(0, 5), st.text(alphabet="pq", min_size=1, max_size=4))
def test_overlapping_edits_are_a_conflict_never_markers(at: int, word: str) -> None:
    base = [f"line {i}" for i in range(6)]
    ours = list(base)
    theirs = list(base)
    ours[at] = f"ours {word}"
    theirs[at] = f"theirs {word}"
    result = merge_text(*(_text(x, newline=True) for x in (base, ours, theirs)))
    assert result.merged is None
    assert result.reason == "overlap" and result.conflicts == 1


def test_a_last_line_without_a_newline_merges_with_an_edit_above_it() -> None:
    base = b"a\nb\nc"
    ours = b"A\nb\nc"
    theirs = b"a\nb\nc\nd"  # appended after the unterminated last line
    assert merge_text(base, ours, theirs).merged == b"A\nb\nc\nd"
    # One side terminating the last line, the other editing the first: both land.
    assert merge_text(base, b"a\nb\nc\n", b"a2\nb\nc").merged == b"a2\nb\nc\n"


def test_empty_files() -> None:
    assert merge_text(b"", b"", b"x").merged == b"x"
    assert merge_text(b"", b"x\n", b"y\n").merged is None
    assert merge_text(b"a\n", b"", b"a\n").merged == b""
    assert merge_text(b"a\nb\nc\n", b"", b"a\nb\nC\n").merged is None


def test_crlf_line_ends_come_back_as_they_were() -> None:
    base = b"one\r\ntwo\r\nthree\r\nfour\r\n"
    ours = b"ONE\r\ntwo\r\nthree\r\nfour\r\n"
    theirs = b"one\r\ntwo\r\nthree\r\nFOUR\r\n"
    assert merge_text(base, ours, theirs).merged == b"ONE\r\ntwo\r\nthree\r\nFOUR\r\n"


def test_binary_and_huge_files_are_not_merged() -> None:
    assert merge_text(b"a\x00\n", b"b\x00\n", b"c\x00\n").reason == "binary"
    assert merge_text(b"\xff\n", b"\xfe\n", b"\xfd\n").reason == "binary"
    big = b"x\n" * (MAX_MERGE_BYTES // 2 + 1)
    assert merge_text(big, big + b"a\n", b"b\n" + big).reason == "too_large"
    assert not is_text(b"\x00") and is_text("héllo\n".encode())


def test_split_lines_keeps_every_byte() -> None:
    for data in (b"", b"a", b"a\n", b"a\r\nb", b"\n\n", b"a\nb\n"):
        assert b"".join(split_lines(data)) == data
