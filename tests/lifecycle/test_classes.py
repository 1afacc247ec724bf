"""Content classes (core.classes): defaults by place and name, `@class` rules, folder classes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.classes import BYTE_WINDOWS, CLASSES, ClassRules, class_of, place_class

D = 24 * 3600 * 10**9


def test_every_class_has_a_byte_window_and_the_precious_ones_last_forever() -> None:
    assert set(BYTE_WINDOWS) == set(CLASSES)
    assert {c for c, w in BYTE_WINDOWS.items() if w is None} == {
        "source",
        "vcs",
        "config",
        "lockfile",
    }
    assert BYTE_WINDOWS["database"] == 30 * D
    assert BYTE_WINDOWS["dependency"] == BYTE_WINDOWS["build"] == 3 * D
    assert BYTE_WINDOWS["scratch"] == D


@pytest.mark.parametrize(
    ("path", "cls"),
    [
        ("src/app.py", "source"),
        ("README", "source"),
        (".bashrc", "source"),
        (".git/HEAD", "vcs"),
        ("sub/.git/objects/ab/cdef", "vcs"),
        (".git", "vcs"),
        (".jj/repo/store", "vcs"),
        ("node_modules/left-pad/index.js", "dependency"),
        ("node_modules/left-pad/package.json", "dependency"),
        (".venv/lib/python3.11/site-packages/x.py", "dependency"),
        ("web/bower_components/a.js", "dependency"),
        ("target/debug/app", "build"),
        ("dist/app.whl", "build"),
        ("pkg/__pycache__/m.cpython-311.pyc", "build"),
        ("web/.next/cache/x", "build"),
        ("tillage.egg-info/PKG-INFO", "build"),
        ("m.pyc", "build"),
        ("lib/m.o", "build"),
        ("build/node_modules/x.js", "build"),
        ("node_modules/x/build/y.js", "dependency"),
        (".cache/pip/x", "scratch"),
        ("tmp/x", "scratch"),
        (".pytest_cache/v/x", "scratch"),
        (".mypy_cache/3.11/x.json", "scratch"),
        ("a.tmp", "scratch"),
        (".x.swp", "scratch"),
        ("notes.txt~", "scratch"),
        ("sub/.DS_Store", "scratch"),
        ("Thumbs.db", "scratch"),
        ("server.log", "scratch"),
        ("app.sqlite", "database"),
        ("data/app.sqlite3", "database"),
        ("dev.db", "database"),
        ("dev.DB", "database"),
        ("dev.db-wal", "database"),
        ("dev.sqlite-shm", "database"),
        ("dev.db-journal", "database"),
        ("Cargo.lock", "lockfile"),
        ("web/package-lock.json", "lockfile"),
        ("yarn.lock", "lockfile"),
        ("go.sum", "lockfile"),
        ("uv.lock", "lockfile"),
        (".env", "config"),
        (".env.local", "config"),
        ("pyproject.toml", "config"),
        ("ci/config.yml", "config"),
        ("setup.cfg", "config"),
        (".tillagepolicy", "config"),
        (".gitignore", "config"),
    ],
)
def test_a_path_is_classed_by_its_place_then_its_name(path: str, cls: str) -> None:
    assert class_of(path) == cls


def test_a_folder_named_like_a_place_classes_everything_below_it() -> None:
    assert place_class("node_modules") == "dependency"
    assert place_class("web/node_modules/a/b") == "dependency"
    assert place_class(".git") == "vcs"
    assert place_class("build/node_modules") == "build"  # the first place from the root
    assert place_class("src") is None
    assert place_class("src/pkg") is None


RULES = [
    "# a comment, and exclusion lines are not class rules",
    "build/",
    "@class dependency third_party/",
    "@class database fixtures/**",
    "@class source node_modules/mine/**",
    "@class scratch /logs",
    "@class build gen/*.c",
]


def test_a_class_rule_wins_over_the_defaults_and_the_last_match_wins() -> None:
    rules = ClassRules.parse(RULES)
    assert rules.problems == ()
    assert [(r.cls, r.pattern) for r in rules.rules] == [
        ("dependency", "third_party/"),
        ("database", "fixtures/**"),
        ("source", "node_modules/mine/**"),
        ("scratch", "/logs"),
        ("build", "gen/*.c"),
    ]
    assert class_of("fixtures/a/b.json", rules) == "database"
    assert class_of("x/fixtures/a", rules) == "source"  # anchored: has a `/`
    assert class_of("fixtures", rules) == "source"  # `fixtures/**` is what is inside
    assert class_of("third_party/lib/a.c", rules) == "dependency"
    assert class_of("src/third_party/a.c", rules) == "dependency"  # no `/`: any depth
    assert class_of("third_party", rules) == "source"  # a trailing `/`: folders only
    assert class_of("node_modules/mine/index.js", rules) == "source"
    assert class_of("node_modules/other/index.js", rules) == "dependency"
    assert class_of("logs/today.txt", rules) == "scratch"
    assert class_of("logs", rules) == "scratch"
    assert class_of("a/logs/x", rules) == "source"
    assert class_of("gen/x.c", rules) == "build"
    assert class_of("gen/sub/x.c", rules) == "source"
    assert class_of("Cargo.lock", rules) == "lockfile"


def test_a_folder_has_a_class_only_when_no_rule_can_differ_below_it() -> None:
    rules = ClassRules.parse(RULES)
    assert place_class("fixtures", rules) is None  # `fixtures/**` does not name it
    assert place_class("fixtures/a", rules) == "database"
    assert place_class("third_party", rules) == "dependency"
    assert place_class("src/third_party/x", rules) == "dependency"
    assert place_class("node_modules", rules) is None  # `node_modules/mine/**` differs
    assert place_class("node_modules/other", rules) == "dependency"
    assert place_class("node_modules/mine", rules) is None
    assert place_class("node_modules/mine/lib", rules) == "source"
    assert place_class("gen", rules) is None
    # an unanchored rule can match at any depth: below any folder of another class
    later = ClassRules.parse([*RULES, "@class scratch *.bak"])
    assert place_class("fixtures/a", later) is None
    assert place_class("node_modules/other", later) is None
    assert place_class("third_party", later) is None
    assert place_class("src", rules) is None
    assert place_class(".git", rules) is None  # `.git/third_party/x` is dependency
    assert place_class(".git", ClassRules.parse(["@class build gen/*.c"])) == "vcs"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("@class bogus src/**", "unknown class"),
        ("@class source", "needs a pattern"),
        ("@class", "needs a class name"),
        ("@class build /", "names no path"),
        ("@class build a/../b", "'..'"),
        ("@class build [z-a]", "runs backwards"),
        ("@class build a[", "never closed"),
        ("@class build !vendor/", "negation"),
    ],
)
def test_a_bad_class_line_is_skipped_and_reported(line: str, problem: str) -> None:
    rules = ClassRules.parse(["@class database db/**", line, "@class scratch *.bak"])
    assert [r.pattern for r in rules.rules] == ["db/**", "*.bak"]
    (reported,) = rules.problems
    assert reported.line == 2
    assert reported.text == line
    assert problem in reported.problem


def test_lines_that_only_start_like_a_class_rule_are_not_class_rules() -> None:
    assert ClassRules.parse(["@classy x", "@class_a b", "#@class build x"]).rules == ()
    assert ClassRules.parse(["@classy x"]).problems == ()


def test_rules_are_equal_when_their_lines_are() -> None:
    assert ClassRules.parse(RULES) == ClassRules.parse(RULES)
    assert ClassRules.parse([]) == ClassRules.EMPTY
    assert not ClassRules.EMPTY
    assert hash(ClassRules.parse(RULES)) == hash(ClassRules.parse(list(RULES)))
    # one policy read from many snapshots is compiled once, and shares its folder memo
    assert ClassRules.parse(RULES) is ClassRules.parse(["", *RULES[1:]])
    assert ClassRules.parse(["*.log", "build/"]) is ClassRules.EMPTY


# -- the folder class is a promise about every path below ----------------------------------------

NAMES = ("a", "node_modules", ".git", "x.db", "build", "c.py")
SEGMENTS = ("a", "b", "*", "?", "[ab]", "node_modules", "x.*", "*.py", "**")
CLASS = st.sampled_from(CLASSES)
PATTERN = st.tuples(
    st.booleans(),  # a leading `/`
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3),
    st.booleans(),  # a trailing `/`
).map(lambda t: ("/" if t[0] else "") + "/".join(t[1]) + ("/" if t[2] else ""))
RULE_LINES = st.lists(st.tuples(CLASS, PATTERN).map(lambda r: f"@class {r[0]} {r[1]}"), max_size=4)
UNIVERSE = ["/".join(p) for n in (1, 2, 3, 4) for p in itertools.product(NAMES, repeat=n)]


@given(RULE_LINES)
@examples(80)
def test_every_path_below_a_classed_folder_gets_the_folder_class(lines: list[str]) -> None:
    rules = ClassRules.parse(lines)
    for folder in UNIVERSE:
        if folder.count("/") >= 3:
            continue
        cls = place_class(folder, rules)
        if cls is None:
            continue
        below = [p for p in UNIVERSE if p.startswith(folder + "/")]
        assert below
        for path in below:
            assert class_of(path, rules) == cls, (lines, folder, path)


@given(RULE_LINES)
@examples(100)
def test_without_rules_that_name_a_path_the_defaults_decide(lines: list[str]) -> None:
    rules = ClassRules.parse(lines)
    for path in UNIVERSE:
        if rules.rule_for(path) is None:
            assert class_of(path, rules) == class_of(path)
