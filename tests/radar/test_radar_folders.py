"""The radar and folders: a folder removed or made a file in one place collides with a touch
beneath it in another, named by the folder (issue 21, item 8); a sibling that shares a prefix
does not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import Till
from tillage.core import codec
from tillage.core.ids import tree_id
from tillage.core.models import ContentKind, Entry, EntryKind
from tillage.core.radar import Collision, ForkChanges, find_collisions, overlaps, touched_paths


def make_fork(till: Till, parent: Path, name: str) -> Path:
    return Path(till.json("fork", name, cwd=parent)["fork"]["path"])


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "lib").mkdir()
    (folder / "lib" / "a.py").write_text("a = 1\n")
    (folder / "lib" / "b.py").write_text("b = 1\n")
    (folder / "README.md").write_text("# demo\n")
    till.json("watch", "--no-daemon")
    return folder


def _snap(till: Till, where: Path) -> None:
    till.json("snap", cwd=where)


def _remove_lib(till: Till, where: Path) -> None:
    shutil.rmtree(where / "lib")
    _snap(till, where)


def _add_in_lib(till: Till, where: Path, name: str = "new.py") -> None:
    (where / "lib" / name).write_text("new\n")
    _snap(till, where)


def _conflicts(till: Till, where: Path) -> list[dict[str, Any]]:
    doc = till.json("radar", cwd=where)
    return [{k: c[k] for k in ("path", "forks", "workspace")} for c in doc["conflicts"]]


def _conflict_events(till: Till, where: Path) -> list[dict[str, Any]]:
    run = till("--json", "events", cwd=where)
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    return [e["detail"] for e in events if e["kind"] == "conflict"]


def test_a_folder_deleted_in_one_fork_collides_with_a_file_added_inside_it_in_another(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _remove_lib(till, a)
    _add_in_lib(till, b)
    assert _conflicts(till, project) == [{"path": "lib", "forks": ["a", "b"], "workspace": False}]


def test_a_folder_the_workspace_deleted_collides_with_a_file_a_fork_added_inside_it(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    _add_in_lib(till, a)
    _remove_lib(till, project)
    assert _conflicts(till, project) == [{"path": "lib", "forks": ["a"], "workspace": True}]


def test_a_folder_a_fork_deleted_collides_with_a_file_the_workspace_added_inside_it(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    _remove_lib(till, a)
    _add_in_lib(till, project)
    assert _conflicts(till, project) == [{"path": "lib", "forks": ["a"], "workspace": True}]


def test_a_folder_made_a_file_collides_with_a_file_added_inside_it(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    shutil.rmtree(a / "lib")
    (a / "lib").write_text("now a file\n")
    _snap(till, a)
    _add_in_lib(till, b)
    assert _conflicts(till, project) == [{"path": "lib", "forks": ["a", "b"], "workspace": False}]


def test_a_file_added_where_another_place_added_a_folder_collides_at_that_name(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    (a / "docs").write_text("a file called docs\n")
    _snap(till, a)
    (project / "docs").mkdir()
    (project / "docs" / "guide.md").write_text("# guide\n")
    _snap(till, project)
    assert _conflicts(till, project) == [{"path": "docs", "forks": ["a"], "workspace": True}]


def test_a_sibling_that_only_shares_a_prefix_with_a_removed_folder_does_not_collide(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _remove_lib(till, a)
    (b / "lib2").mkdir()
    (b / "lib2" / "x.py").write_text("x\n")
    (b / "lib.py").write_text("beside\n")
    _snap(till, b)
    assert _conflicts(till, project) == []


def test_two_places_adding_different_files_in_one_new_folder_do_not_collide(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    for where, name in ((a, "one.md"), (project, "two.md")):
        (where / "notes").mkdir()
        (where / "notes" / name).write_text("note\n")
        _snap(till, where)
    assert _conflicts(till, project) == []


def test_a_folder_removed_against_an_edit_inside_it_is_one_collision_named_by_the_folder(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _remove_lib(till, a)
    (b / "lib" / "a.py").write_text("a = 2\n")
    _snap(till, b)
    assert _conflicts(till, project) == [{"path": "lib", "forks": ["a", "b"], "workspace": False}]


def test_a_third_forks_own_collision_beneath_the_folder_is_its_own(
    till: Till, project: Path
) -> None:
    a, b, c = (make_fork(till, project, n) for n in ("a", "b", "c"))
    _remove_lib(till, a)
    _add_in_lib(till, b, "x.py")
    _add_in_lib(till, c, "x.py")
    assert _conflicts(till, project) == [
        {"path": "lib", "forks": ["a", "b", "c"], "workspace": False},
        {"path": "lib/x.py", "forks": ["b", "c"], "workspace": False},
    ]


def test_the_folders_collision_is_announced_and_resolves_when_the_fork_goes(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _remove_lib(till, a)
    _add_in_lib(till, b)
    till.json("fork-rm", "b", "--yes")
    assert [
        (e["path"], e["state"], e["forks"], e["workspace"]) for e in _conflict_events(till, project)
    ] == [
        ("lib", "opened", ["a", "b"], False),
        ("lib", "resolved", ["a", "b"], False),
    ]


def test_a_look_recorded_by_the_earlier_rules_is_compared_again_without_opening_twice(
    till: Till, project: Path
) -> None:
    """A look of the previous build (state version 1) named a folder removal against an edit
    inside it by the file: the next look compares again (it does not trust the recorded states),
    resolves the file's collision and opens the folder's, and announces nothing twice."""
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _remove_lib(till, a)
    (b / "lib" / "a.py").write_text("a = 2\n")
    _snap(till, b)
    first = till.json("radar")
    assert [c["path"] for c in first["conflicts"]] == ["lib"]
    workspace_id = till.json("status")["id"]
    state_file = till.home / "radar" / f"{workspace_id}.json"
    doc = json.loads(state_file.read_text())
    doc["version"] = 1
    doc["collisions"] = {"lib/a.py": [["a", "b"], False]}
    state_file.write_text(json.dumps(doc))
    again = till.json("radar")
    assert [c["path"] for c in again["conflicts"]] == ["lib"]
    assert [(e["path"], e["state"]) for e in _conflict_events(till, project)][-2:] == [
        ("lib", "opened"),
        ("lib/a.py", "resolved"),
    ]
    assert till.json("radar")["events"] == 0


# -- pure rules ----------------------------------------------------------------------------


def test_overlaps_name_the_folder_once_and_leave_prefix_siblings_alone() -> None:
    removed = frozenset({"lib", "lib/a.py", "lib/sub", "lib/sub/c.py"})
    assert overlaps(removed, frozenset({"lib/new.py"})) == {"lib"}
    assert overlaps(frozenset({"lib/new.py"}), removed) == {"lib"}
    assert overlaps(removed, frozenset({"lib/a.py", "lib/sub/d.py"})) == {"lib"}
    assert overlaps(removed, frozenset({"lib2/x.py", "lib.py", "libx"})) == set()
    assert overlaps(frozenset({"docs"}), frozenset({"docs/guide.md"})) == {"docs"}
    assert overlaps(frozenset({"a/x", "b"}), frozenset({"a/y", "b"})) == {"b"}
    assert overlaps(frozenset(), removed) == set()


def test_find_collisions_keeps_the_folder_rule_for_forks_and_what_is_above_them() -> None:
    forks = [
        ForkChanges("a", frozenset({"lib", "lib/a.py"}), {"": frozenset({"lib/b.py"})}),
        ForkChanges("b", frozenset({"lib/new.py"}), {"": frozenset()}),
        ForkChanges("c", frozenset({"lib2/x.py"}), {"": frozenset()}),
    ]
    assert find_collisions(forks) == [Collision("lib", ("a", "b"), True)]


def _file(name: str) -> Entry:
    return Entry(name.encode(), EntryKind.FILE, 0o644, 1, 0, ContentKind.CHUNK, b"1")


def _store(entries: list[Entry], trees: dict[bytes, list[Entry]]) -> bytes:
    tid = bytes(tree_id(codec.encode_tree(entries)))
    trees[tid] = entries
    return tid


def _folder(name: str, tid: bytes) -> Entry:
    return Entry(name.encode(), EntryKind.DIR, 0o755, 0, 0, ContentKind.TREE, tid)


def test_touched_paths_add_the_folders_that_are_gone_to_the_changed_files() -> None:
    trees: dict[bytes, list[Entry]] = {}
    sub = _store([_file("c.py")], trees)
    lib = _store([_file("a.py"), _folder("sub", sub)], trees)
    empty = _store([], trees)
    old = _store([_folder("lib", lib), _folder("keep", sub), _folder("vanish", empty)], trees)
    new = _store([_file("lib"), _folder("keep", sub)], trees)
    assert touched_paths(trees.__getitem__, old, new) == {
        "lib",
        "lib/a.py",
        "lib/sub",
        "lib/sub/c.py",
        "vanish",
    }
    added = _store([_folder("lib", lib)], trees)
    assert touched_paths(trees.__getitem__, empty, added) == {"lib/a.py", "lib/sub/c.py"}


# -- find_collisions against the rule stated pair by pair ------------------------------------

_paths = st.frozensets(
    st.lists(st.sampled_from(("a", "b", "ab")), min_size=1, max_size=3).map("/".join),
    max_size=6,
)


def _pair_rule(x: frozenset[str], y: frozenset[str]) -> set[str]:
    """The module's rule, spelled out: a path one touched that the other touched too or
    touched something beneath, without those beneath another such path."""

    def under(p: str, q: str) -> bool:
        return q.startswith(p + "/")

    hit = {p for p in x if p in y or any(under(p, q) for q in y)}
    hit |= {p for p in y if p in x or any(under(p, q) for q in x)}
    return {p for p in hit if not any(under(h, p) for h in hit)}


@given(st.lists(_paths, min_size=1, max_size=4), _paths)
@settings(deadline=None)
def test_find_collisions_is_the_pair_rule_over_every_two_places(
    owns: list[frozenset[str]], workspace: frozenset[str]
) -> None:
    """Unrelated forks pair with each other, and each with the workspace's touches."""
    forks = [ForkChanges(f"f{i}", own, {"": workspace}) for i, own in enumerate(owns)]
    expected: dict[str, set[str]] = {}
    for i, own in enumerate(owns):
        for path in _pair_rule(own, workspace):
            expected.setdefault(path, set()).update((f"f{i}", ""))
        for j in range(i + 1, len(owns)):
            for path in _pair_rule(own, owns[j]):
                expected.setdefault(path, set()).update((f"f{i}", f"f{j}"))
    assert find_collisions(forks) == [
        Collision(p, tuple(sorted(n for n in names if n)), "" in names)
        for p, names in sorted(expected.items())
    ]
