"""Claim globs (core.globs): matching agrees with fnmatch per segment, and overlap is exact.

Overlap is checked from both sides: whenever a brute-force search over a small universe of paths
finds one covered by both globs, `overlap` says yes (nothing missed); and whenever `overlap`
says yes, the path `witness` returns is covered by both (nothing invented).
"""

from __future__ import annotations

import fnmatch
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core import globs
from tillage.core.globs import BadPatternError, covers, matches, normalize, overlap, witness

# Pieces of a segment glob, over a small alphabet so that globs and paths meet often.
ITEMS = ("a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-b]", "[.]")
NAMES = ("a", "b", "ab", ".a", "a.", "ba", "bb")

segment_globs = (
    st.lists(st.sampled_from(ITEMS), min_size=1, max_size=3)
    .map("".join)
    .filter(lambda g: g not in (".", ".."))  # refused: no path names them
)
glob_texts = st.lists(st.one_of(segment_globs, st.just("**")), min_size=1, max_size=3).map("/".join)
names = st.text(alphabet="ab.", min_size=1, max_size=3).filter(lambda n: n not in (".", ".."))

UNIVERSE = [
    "/".join(parts) for depth in (1, 2, 3) for parts in itertools.product(NAMES, repeat=depth)
]


@given(segment_globs, names)
def test_a_segment_matches_as_fnmatch_says(glob: str, name: str) -> None:
    assert matches(glob, name) == fnmatch.fnmatchcase(name, glob)


@given(glob_texts, glob_texts)
@examples(300)
def test_overlap_misses_no_path_that_both_cover(a: str, b: str) -> None:
    both = next((p for p in UNIVERSE if covers(a, p) and covers(b, p)), None)
    if both is not None:
        assert overlap(a, b), (a, b, both)


@given(glob_texts, glob_texts)
@examples(500)
def test_an_overlap_comes_with_a_path_both_globs_cover(a: str, b: str) -> None:
    found = witness(a, b)
    if found is not None:
        assert covers(a, found) and covers(b, found), (a, b, found)
        assert all(n not in (".", "..") for n in found.split("/")), found


@given(glob_texts, glob_texts)
@settings(deadline=None)
def test_overlap_is_symmetric(a: str, b: str) -> None:
    assert overlap(a, b) == overlap(b, a)


@st.composite
def path_and_two_globs_covering_it(draw: st.DrawFn) -> tuple[str, str, str]:
    """A path, and two globs made from it by generalizing it at random: a character becomes
    `?` or a class holding it, a run becomes `*`, a segment `**`, the tail is cut off after a
    plain name (a claim on a folder covers what is below it)."""
    parts = draw(st.lists(names, min_size=1, max_size=4))

    def generalize() -> str:
        keep = draw(st.integers(min_value=1, max_value=len(parts)))
        out = []
        for index, part in enumerate(parts[:keep]):
            if keep < len(parts) and index == keep - 1:
                out.append(part)  # a glob cut short reaches below only from a plain name
                continue
            choice = draw(st.integers(min_value=0, max_value=4))
            if choice == 0:
                out.append("**")
            elif choice == 1:
                out.append("*")
            elif choice == 2:
                out.append("".join(draw(st.sampled_from(["?", f"[{c}b]", c])) for c in part))
            elif choice == 3:
                out.append(part[0] + "*" if part[0] != "." else ".*")
            else:
                out.append(part)
        return "/".join(out)

    return "/".join(parts), generalize(), generalize()


@given(path_and_two_globs_covering_it())
@settings(deadline=None)
def test_two_globs_made_to_cover_one_path_overlap(case: tuple[str, str, str]) -> None:
    path, a, b = case
    assert covers(a, path) and covers(b, path), case
    assert overlap(a, b), case


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/**", "src/a/*.py", True),
        ("*.md", "docs/x.md", False),
        ("src/a.py", "src/*.py", True),
        ("src", "src/pkg/app.py", True),  # a claim on a folder covers its files
        ("docs/*.md", "docs/api/x.md", False),
        ("**/*.py", "tests/*.txt", False),
        ("**/*.py", "a/b/c/d.py", True),
        ("a/**/b", "a/b", True),
        ("[a-c]*", "d*", False),
        ("[!a]", "a", False),
        (".?", "?.", False),  # only `..` fits both, and no path holds a `..`
        ("src/*", "src/*/x", False),  # `src/*` names the entries of src, not below them
        ("src/*", "src/a", True),
        ("docs", "docs/**", True),
        ("lib/?", "lib/ab", False),
    ],
)
def test_known_pairs(a: str, b: str, expected: bool) -> None:
    assert overlap(a, b) is expected
    assert overlap(b, a) is expected


@pytest.mark.parametrize(
    "pattern", ["", "   ", "/etc/passwd", "../x", "src/../x", "a/./b", "x[ab", "[z-a]", "."]
)
def test_a_bad_pattern_is_refused_as_invalid_argument(pattern: str) -> None:
    with pytest.raises(BadPatternError) as info:
        globs.parse(pattern)
    assert info.value.code == -32066


def test_a_pattern_has_one_spelling() -> None:
    assert normalize("./src//pkg/") == "src/pkg"
    assert normalize("src/**/") == "src/**"


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src", "src/pkg/app.py", True),  # a plain name: the folder and all below it
        ("src/*", "src/a.py", True),
        ("src/*", "src/a/b.py", False),  # a wildcard's last segment reaches no deeper
        ("src/**", "src/a/b.py", True),
        ("*.md", ".hidden.md", True),  # `*` matches a leading dot, as in gitignore
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b/c", True),
        ("docs/[!a]*", "docs/api", False),
        ("docs/[!a]*", "docs/guide", True),
        ("lib\\*", "lib*", True),  # an escaped star is a star
        ("lib\\*", "libx", False),
    ],
)
def test_what_a_claim_covers(pattern: str, path: str, expected: bool) -> None:
    assert covers(pattern, path) is expected


# Every name of the `names` strategy, and the paths of one or two of them: what lies below a
# path, as deep as a glob of three segments can ask for past one name.
ALL_NAMES = [
    n
    for size in (1, 2, 3)
    for n in map("".join, itertools.product("ab.", repeat=size))
    if n not in (".", "..")
]
BELOW = ALL_NAMES + [f"{x}/{y}" for x in ALL_NAMES for y in ALL_NAMES]


@given(glob_texts, names)
@examples(100)
def test_a_claim_reaches_a_path_when_it_covers_it_or_a_path_below_it(glob: str, name: str) -> None:
    below = [name] + [f"{name}/{rest}" for rest in BELOW]
    assert globs.reaches(glob, name) == any(covers(glob, p) for p in below), (glob, name)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("lib/a.py", "lib", True),
        ("lib/**", "lib", True),
        ("lib", "lib/sub", True),
        ("lib2/**", "lib", False),
        ("*.py", "lib", False),
        ("docs/*.md", "docs", True),
        ("a\\*b/x", "a*b", True),
        ("a\\*b/x", "azb", False),
    ],
)
def test_what_a_claim_reaches(pattern: str, path: str, expected: bool) -> None:
    assert globs.reaches(pattern, path) is expected
