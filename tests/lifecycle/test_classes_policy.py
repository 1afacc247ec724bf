"""`@class NAME PATTERN` lines in `.tillagepolicy`: class rules, never exclusion patterns; a bad
one is skipped and reported like any bad policy line."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till
from tillage.core.classes import class_of
from tillage.workspace.policy import Policy

POLICY = """\
# generated fixtures are data, third_party is vendored
@class database fixtures/**
@class dependency third_party/
cache/
@class bogus x/**
@class source
"""


def test_class_lines_set_classes_and_exclude_nothing() -> None:
    policy = Policy.from_bytes(POLICY.encode())
    assert not policy.excludes("fixtures/a.json", is_dir=False)
    assert not policy.excludes("third_party", is_dir=True)
    assert not policy.excludes("@class database fixtures", is_dir=False)
    assert policy.excludes("cache", is_dir=True)
    assert class_of("fixtures/a.json", policy.classes) == "database"
    assert class_of("src/third_party/lib.c", policy.classes) == "dependency"
    assert class_of("src/app.py", policy.classes) == "source"


def test_a_bad_class_line_is_reported_with_its_line_and_the_rest_still_apply() -> None:
    policy = Policy.from_bytes(POLICY.encode())
    assert [(p.file, p.line, p.text) for p in policy.problems] == [
        (".tillagepolicy", 5, "@class bogus x/**"),
        (".tillagepolicy", 6, "@class source"),
    ]
    assert "unknown class" in policy.problems[0].problem
    assert [r.pattern for r in policy.classes.rules] == ["fixtures/**", "third_party/"]


def test_bad_class_lines_and_bad_patterns_are_reported_in_line_order() -> None:
    policy = Policy(["@class nope a", "[z-a]", "@class build out2/", "!"])
    assert [p.line for p in policy.problems] == [1, 2, 4]
    assert [r.pattern for r in policy.classes.rules] == ["out2/"]
    assert not policy.excludes("out2", is_dir=True)


def test_a_policy_of_only_class_lines_excludes_nothing() -> None:
    policy = Policy(["@class scratch logs/"])
    assert policy.empty
    assert policy.problems == ()
    assert not policy.excludes("logs", is_dir=True)


def test_a_policy_without_class_lines_has_no_class_rules(tmp_path: Path) -> None:
    (tmp_path / ".tillagepolicy").write_text("cache/\n")
    assert not Policy.load(tmp_path).classes
    assert not Policy.load(tmp_path / "missing").classes


def test_a_bad_class_line_is_reported_by_a_seal_and_is_not_fatal(till: Till, folder: Path) -> None:
    (folder / ".tillagepolicy").write_text(POLICY)
    (folder / "fixtures").mkdir()
    (folder / "fixtures" / "a.json").write_text("{}")
    (folder / "cache").mkdir()
    (folder / "cache" / "x").write_text("x")
    doc = till.json("watch", "--no-daemon")
    problems = doc["policy_problems"]
    assert [(p["line"], p["text"]) for p in problems] == [
        (5, "@class bogus x/**"),
        (6, "@class source"),
    ]
    status = till.json("status")
    assert [p["line"] for p in status["policy_problems"]] == [5, 6]
    head = doc["head"]["id"]
    assert till.json("cat", head, "fixtures/a.json")["size"] == 2  # classed, still captured
    excluded = till("--json", "cat", head, "cache/x")  # the exclusion line still applies
    assert excluded.code == 1 and excluded.error["code"] == -32061
