"""The conflict radar: `till radar` over real forks, its `conflict` events, and its pure rules."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import Till
from tillage.core import codec
from tillage.core.ids import tree_id
from tillage.core.models import ContentKind, Entry, EntryKind
from tillage.core.radar import Collision, ForkChanges, changed_paths, find_collisions, transitions


def make_fork(till: Till, parent: Path, name: str) -> Path:
    """A fork of `parent` called `name`, made by `till fork`; returns its folder."""
    return Path(till.json("fork", name, cwd=parent)["fork"]["path"])


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "src").mkdir()
    for i in range(6):
        (folder / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    (folder / "README.md").write_text("# demo\n")
    till.json("watch", "--no-daemon")
    return folder


def _edit(till: Till, where: Path, path: str, text: str) -> None:
    (where / path).write_text(text)
    till.json("snap", "-m", f"edit {path}", cwd=where)


def _radar(till: Till, where: Path) -> dict[str, Any]:
    doc: dict[str, Any] = till.json("radar", cwd=where)
    return doc


def _conflict_events(till: Till, where: Path) -> list[dict[str, Any]]:
    run = till("--json", "events", cwd=where)
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    return [e for e in events if e["kind"] == "conflict"]


def test_two_forks_editing_the_same_file_collide_and_different_files_do_not(
    till: Till, project: Path
) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    _edit(till, alpha, "src/m1.py", "alpha\n")
    _edit(till, beta, "src/m2.py", "beta\n")
    doc = _radar(till, project)
    assert doc["conflicts"] == []
    assert doc["forks_scanned"] == 2

    _edit(till, beta, "src/m1.py", "beta too\n")
    doc = _radar(till, project)
    assert doc["conflicts"] == [
        {
            "path": "src/m1.py",
            "forks": ["alpha", "beta"],
            "workspace": False,
            "claimed_by": [],
            "claim": "unclaimed",
        }
    ]


def test_a_fork_and_the_workspace_editing_one_file_collide(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "README.md", "fork\n")
    _edit(till, project, "README.md", "workspace\n")
    _edit(till, project, "src/m3.py", "only here\n")
    doc = _radar(till, project)
    assert doc["conflicts"] == [
        {
            "path": "README.md",
            "forks": ["alpha"],
            "workspace": True,
            "claimed_by": [],
            "claim": "unclaimed",
        }
    ]


def test_a_change_the_workspace_made_before_the_fork_is_no_collision(
    till: Till, project: Path
) -> None:
    _edit(till, project, "README.md", "before the fork\n")
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "src/m0.py", "fork\n")
    assert _radar(till, project)["conflicts"] == []


def test_the_radar_reads_only_sealed_states(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    _edit(till, alpha, "src/m4.py", "alpha\n")
    (beta / "src" / "m4.py").write_text("beta, not sealed yet\n")
    assert _radar(till, project)["conflicts"] == []
    till.json("snap", cwd=beta)
    assert [c["path"] for c in _radar(till, project)["conflicts"]] == ["src/m4.py"]


def test_conflict_events_open_change_and_resolve(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    gamma = make_fork(till, project, "gamma")
    alpha_start = till.json("timeline", "-n", "1", cwd=alpha)["snapshots"][0]["id"]
    _edit(till, alpha, "src/m1.py", "alpha\n")
    _edit(till, beta, "src/m1.py", "beta\n")
    assert len(_radar(till, project)["conflicts"]) == 1
    again = _radar(till, project)  # nothing changed: nothing to announce
    assert again["events"] == 0 and len(again["conflicts"]) == 1
    assert len(_conflict_events(till, project)) == 1

    _edit(till, gamma, "src/m1.py", "gamma\n")
    _radar(till, project)
    till.json("rewind", alpha_start, "--yes", cwd=alpha)
    till.json("snap", "-m", "rewound", cwd=alpha)
    _radar(till, project)
    till.json("rewind", till.json("timeline", cwd=gamma)["snapshots"][-1]["id"], "--yes", cwd=gamma)
    till.json("snap", cwd=gamma)
    assert _radar(till, project)["conflicts"] == []

    events = _conflict_events(till, project)
    assert [(e["detail"]["state"], e["detail"]["forks"]) for e in events] == [
        ("opened", ["alpha", "beta"]),
        ("changed", ["alpha", "beta", "gamma"]),
        ("changed", ["beta", "gamma"]),
        ("resolved", ["beta", "gamma"]),
    ]
    assert {e["detail"]["path"] for e in events} == {"src/m1.py"}
    assert all(e["detail"]["workspace"] is False for e in events)


def test_removing_a_fork_resolves_its_collisions(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    _edit(till, alpha, "README.md", "alpha\n")
    _edit(till, beta, "README.md", "beta\n")
    assert len(_radar(till, project)["conflicts"]) == 1
    till.json("fork-rm", "beta", "--yes")
    doc = _radar(till, project)
    assert (doc["conflicts"], doc["forks_scanned"]) == ([], 1)
    last = _conflict_events(till, project)[-1]["detail"]
    assert (last["state"], last["forks"]) == ("resolved", ["alpha", "beta"])


def test_after_a_merge_the_fork_counts_its_changes_from_what_was_merged(
    till: Till, project: Path
) -> None:
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "src/m3.py", "alpha\n")
    _edit(till, project, "README.md", "workspace\n")
    merged = till("--json", "merge", "alpha")
    assert merged.code == 0, merged.stdout
    assert _radar(till, project)["conflicts"] == []
    _edit(till, alpha, "src/m3.py", "alpha again\n")
    assert _radar(till, project)["conflicts"] == []
    _edit(till, project, "src/m3.py", "workspace too\n")
    assert [c["path"] for c in _radar(till, project)["conflicts"]] == ["src/m3.py"]


def _forget_last_look(till: Till, project: Path) -> None:
    """Deletes the radar's record of its last look at `project`: the next look is a first one,
    to which every open collision is new (what a crash before the first record leaves)."""
    state = till.home / "radar" / f"{till.json('status', cwd=project)['id']}.json"
    state.unlink(missing_ok=True)


@pytest.mark.process
def test_concurrent_looks_announce_each_transition_once(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    for i in range(3):
        _edit(till, alpha, f"src/m{i}.py", "alpha\n")
        _edit(till, beta, f"src/m{i}.py", "beta\n")
    _radar(till, project)
    known = len(_conflict_events(till, project))
    _forget_last_look(till, project)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "radar"],
            cwd=project,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    assert sum(d["events"] for d in docs) == 3
    assert all(len(d["conflicts"]) == 3 for d in docs)
    opened = [e["detail"]["path"] for e in _conflict_events(till, project)[known:]]
    assert sorted(opened) == ["src/m0.py", "src/m1.py", "src/m2.py"]


def test_a_fork_of_a_fork_collides_only_with_what_its_parent_changed_after_it(
    till: Till, project: Path
) -> None:
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "src/m5.py", "alpha first\n")
    inner = make_fork(till, alpha, "inner")
    _edit(till, inner, "src/m5.py", "inner\n")
    # alpha's edit came before the inner fork: inherited, not a second change.
    assert _radar(till, project)["conflicts"] == []
    _edit(till, alpha, "src/m5.py", "alpha again\n")
    doc = _radar(till, project)
    assert doc["forks_scanned"] == 2
    assert doc["conflicts"] == [
        {
            "path": "src/m5.py",
            "forks": ["alpha", "alpha/inner"],
            "workspace": False,
            "claimed_by": [],
            "claim": "unclaimed",
        }
    ]
    # The whole family from inside it: names from the root.
    family = till.json("radar", "--family", cwd=inner)
    assert family["scanned"] == str(project.resolve())
    assert [c["forks"] for c in family["conflicts"]] == [["alpha", "alpha/inner"]]
    # Seen from alpha, the inner fork is its own fork.
    assert _radar(till, alpha)["scanned"] == str(alpha.resolve())
    assert _radar(till, alpha)["conflicts"] == [
        {
            "path": "src/m5.py",
            "forks": ["inner"],
            "workspace": True,
            "claimed_by": [],
            "claim": "unclaimed",
        }
    ]


def test_a_conflict_names_the_live_claims_that_cover_its_path(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    claim = till.json("claim", "src/**", "--owner", "alice", cwd=alpha)["claim"]
    till.json("claim", "README.md", "--owner", "bob")
    _edit(till, alpha, "src/m2.py", "alpha\n")
    _edit(till, project, "src/m2.py", "workspace\n")
    (conflict,) = _radar(till, project)["conflicts"]
    assert conflict["claimed_by"] == [
        {
            "id": claim["id"],
            "owner": "alice",
            "pattern": "src/**",
            "workspace": str(alpha),
            "workspace_id": claim["workspace_id"],
            "party": True,
        }
    ]
    assert conflict["claim"] == "covered"
    assert "claimed by alice (src/**)" in till("radar").stdout


def test_radar_without_forks_and_its_human_page(till: Till, project: Path) -> None:
    run = till("radar")
    assert run.code == 0
    assert "No forks" in run.stdout
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "README.md", "a\n")
    _edit(till, project, "README.md", "w\n")
    run = till("radar")
    assert run.code == 0, run.stderr
    assert "README.md" in run.stdout and "workspace, alpha" in run.stdout


def _store_files(home: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def test_a_look_at_unchanged_states_writes_nothing_to_the_store(till: Till, project: Path) -> None:
    till.json("status")
    before = _store_files(till.home)
    assert _radar(till, project)["conflicts"] == []  # no fork: nothing to record
    assert _store_files(till.home) == before
    alpha = make_fork(till, project, "alpha")
    _edit(till, alpha, "README.md", "alpha\n")
    _edit(till, project, "README.md", "workspace\n")
    assert len(_radar(till, project)["conflicts"]) == 1
    before = _store_files(till.home)
    assert _radar(till, project)["events"] == 0
    assert _store_files(till.home) == before


def test_radar_outside_a_workspace_is_not_attached(till: Till) -> None:
    run = till("--json", "radar")
    assert run.code == 1
    assert run.error["name"] == "workspace.not_attached"


# -- pure rules ----------------------------------------------------------------------------


def test_find_collisions_pairs_unrelated_forks_and_forks_with_what_is_above_them() -> None:
    forks = [
        ForkChanges("a", frozenset({"x", "y"}), {"": frozenset({"y", "z"})}),
        ForkChanges("b", frozenset({"x"}), {"": frozenset()}),
        ForkChanges("a/c", frozenset({"x", "w"}), {"": frozenset(), "a": frozenset({"w"})}),
    ]
    assert find_collisions(forks) == [
        # a/c's x is checked against a's changes since a/c's base (w only), not a's own x.
        Collision("w", ("a", "a/c"), False),
        Collision("x", ("a", "a/c", "b"), False),
        Collision("y", ("a",), True),
    ]


def test_transitions_say_opened_changed_and_resolved() -> None:
    before = {"p": (("a", "b"), False), "q": (("a",), True)}
    now = [Collision("p", ("a", "b", "c"), False), Collision("r", ("b",), True)]
    assert [(t.path, t.state) for t in transitions(before, now)] == [
        ("p", "changed"),
        ("q", "resolved"),
        ("r", "opened"),
    ]


def test_changed_paths_prunes_equal_subtrees_and_lists_the_files_of_a_new_folder() -> None:
    def file(name: str, content: bytes) -> Entry:
        return Entry(name.encode(), EntryKind.FILE, 0o644, 1, 0, ContentKind.CHUNK, content)

    def folder(name: str, tree: bytes) -> Entry:
        return Entry(name.encode(), EntryKind.DIR, 0o755, 0, 0, ContentKind.TREE, tree)

    trees = {
        b"same": [file("k", b"1")],
        b"new": [file("n1", b"1"), file("n2", b"2")],
        b"old_root": [folder("keep", b"same"), file("f", b"1")],
        b"new_root": [folder("keep", b"same"), file("f", b"2"), folder("added", b"new")],
    }
    read: list[bytes] = []

    def read_tree(tid: bytes) -> list[Entry]:
        read.append(tid)
        return trees[tid]

    assert changed_paths(read_tree, b"old_root", b"new_root") == {"f", "added/n1", "added/n2"}
    assert b"same" not in read


# -- changed_paths against a full diff of flattened manifests --------------------------------

_NAMES = ("a", "b", "c")
_leaf = st.tuples(st.sampled_from((EntryKind.FILE, EntryKind.SYMLINK)), st.sampled_from(b"xy"))
_trees = st.recursive(
    _leaf,
    lambda children: st.dictionaries(st.sampled_from(_NAMES), children, max_size=3),
    max_leaves=12,
)


def _store_tree(spec: Any, trees: dict[bytes, list[Entry]]) -> bytes:
    """Writes a nested dict of leaves into `trees` (ID -> entries) and returns its root ID."""
    entries = []
    for name, child in sorted(spec.items()):
        if isinstance(child, dict):
            sub = _store_tree(child, trees)
            entries.append(Entry(name.encode(), EntryKind.DIR, 0o755, 0, 7, ContentKind.TREE, sub))
        else:
            kind, byte = child
            content_kind = ContentKind.CHUNK if kind is EntryKind.FILE else ContentKind.TARGET
            entries.append(Entry(name.encode(), kind, 0o644, 1, 7, content_kind, bytes([byte])))
    encoded = codec.encode_tree(entries)
    tid = bytes(tree_id(encoded))
    trees[tid] = entries
    return tid


def _flat(spec: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, child in spec.items():
        path = f"{prefix}{name}"
        out[path] = "dir" if isinstance(child, dict) else child
        if isinstance(child, dict):
            out.update(_flat(child, path + "/"))
    return out


@given(
    st.dictionaries(st.sampled_from(_NAMES), _trees, max_size=3),
    st.dictionaries(st.sampled_from(_NAMES), _trees, max_size=3),
)
@settings(deadline=None)
def test_changed_paths_are_the_non_folder_paths_a_full_diff_finds(old: Any, new: Any) -> None:
    trees: dict[bytes, list[Entry]] = {}
    old_id, new_id = _store_tree(old, trees), _store_tree(new, trees)
    before, after = _flat(old), _flat(new)
    no_leaf = (None, "dir")
    expected = {
        p
        for p in before.keys() | after.keys()
        if before.get(p) != after.get(p)
        and (before.get(p) not in no_leaf or after.get(p) not in no_leaf)
    }
    assert changed_paths(trees.__getitem__, old_id, new_id) == expected


def test_a_look_that_dies_before_recording_itself_announces_again_and_loses_nothing(
    till: Till, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tillage.features.radar import radar
    from tillage.store.store import Store

    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    for path in ("README.md", "src/m0.py"):
        _edit(till, alpha, path, "alpha\n")
        _edit(till, beta, path, "beta\n")
    workspace_id = till.json("status")["id"]
    _radar(till, project)
    known = len(_conflict_events(till, project))
    _forget_last_look(till, project)

    def crash(*_args: object) -> None:
        raise RuntimeError("killed before the look was recorded")

    store = Store.open(till.home)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(radar, "_write_state", crash)
            with pytest.raises(RuntimeError):
                radar.observe_scan(store, workspace_id)
        assert radar.observe_scan(store, workspace_id).events == 2  # announced again
        assert radar.observe_scan(store, workspace_id).events == 0
    finally:
        store.close()
    opened = [e["detail"]["path"] for e in _conflict_events(till, project)[known:]]
    assert sorted(opened) == ["README.md", "README.md", "src/m0.py", "src/m0.py"]


def test_a_look_after_a_change_in_a_fork_announces_for_the_family_and_never_fails(
    till: Till, project: Path
) -> None:
    from tillage.features.radar import radar
    from tillage.platform.locks import file_lock
    from tillage.store.store import Store

    alpha = make_fork(till, project, "alpha")
    inner = make_fork(till, alpha, "inner")
    _edit(till, inner, "README.md", "inner\n")
    _edit(till, project, "README.md", "workspace\n")
    _forget_last_look(till, project)
    root_id = till.json("status", cwd=project)["id"]
    inner_id = till.json("status", cwd=inner)["id"]
    store = Store.open(till.home)
    try:
        with file_lock(store.locks_dir / f"radar-{root_id}.lock"):
            started = time.monotonic()
            radar.look_for_collisions(store, inner_id)  # another look holds the lock
            assert time.monotonic() - started < radar.LOOK_TIMEOUT + 5
        known = len(_conflict_events(till, project))
        radar.look_for_collisions(store, inner_id)
    finally:
        store.close()
    (event,) = _conflict_events(till, project)[known:]
    assert event["detail"] == {
        "path": "README.md",
        "forks": ["alpha/inner"],
        "workspace": True,
        "state": "opened",
    }
