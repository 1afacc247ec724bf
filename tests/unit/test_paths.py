"""Workspace paths: parse refuses anything that could leave the root and normalises the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.hypothesis_profiles import examples

from tillage.core.paths import ancestors, covers, fs_decode, fs_encode, join, parse
from tillage.errors import InvalidArgumentError


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "/abs",
        "/",
        "..",
        "a/../b",
        "a/..",
        "../a",
        "a\0b",
        "\0",
        ".tillage/x",
        ".tillage",
        "./.tillage",
        "//.tillage/",
        ".",
        "./",
        "a/./../b",
        "///",
    ],
)
def test_parse_refuses_paths_that_are_empty_absolute_escaping_or_tillages_own(raw: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse(raw)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("a//b/./c/", "a/b/c"),
        ("a", "a"),
        ("./a", "a"),
        ("a/.", "a"),
        ("a/b/", "a/b"),
        ("...", "..."),
        ("a/.tillage", "a/.tillage"),
        (".tillagex/y", ".tillagex/y"),
        ("a b/ c ", "a b/ c "),
    ],
)
def test_parse_normalises_redundant_separators_and_dots(raw: str, normal: str) -> None:
    assert parse(raw) == normal


def test_an_absolute_path_is_refused_with_a_next_step_that_says_relative() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse("/etc/passwd")
    assert "relative" in info.value.next


# Paths built from the pieces that matter: separators, dot names, the control folder, NUL, and
# names that only look like them.
pieces = st.sampled_from(
    ["a", "b", "é", "\udcff", ".", "..", "...", ".tillage", ".tillagex", "/", "//", "\0", " "]
)
raw_paths = st.lists(pieces, max_size=8).map("".join)


def _should_refuse(raw: str) -> bool:
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    return (
        not raw
        or "\0" in raw
        or raw.startswith("/")
        or ".." in parts
        or not parts
        or parts[0] == ".tillage"
    )


@examples(400)
@given(raw_paths)
def test_parse_accepts_exactly_the_paths_that_stay_inside_the_workspace(raw: str) -> None:
    if _should_refuse(raw):
        with pytest.raises(InvalidArgumentError):
            parse(raw)
    else:
        parse(raw)


@examples(400)
@given(raw_paths | st.text(max_size=30))
def test_an_accepted_path_is_normal_relative_and_parses_to_itself(raw: str) -> None:
    try:
        path = parse(raw)
    except InvalidArgumentError:
        return
    assert parse(path) == path
    assert not path.startswith("/")
    assert not path.endswith("/")
    parts = path.split("/")
    assert all(p not in ("", ".", "..") for p in parts)
    assert parts[0] != ".tillage"
    assert "\0" not in path


@examples(100)
@given(st.binary(max_size=40))
def test_file_system_names_round_trip_through_workspace_strings(name: bytes) -> None:
    assert fs_encode(fs_decode(name)) == name


def test_join_covers_and_ancestors_agree_on_what_lies_below_what() -> None:
    assert join("", "a") == "a"
    assert join("a/b", "c") == "a/b/c"
    assert covers("a", "a")
    assert covers("a", "a/b")
    assert not covers("a", "ab")
    assert not covers("a/b", "a")
    assert ancestors("a/b/c") == ["a", "a/b"]
    assert ancestors("a") == []
