"""Planning a rewind (core.rewind_plan): applying the plan to the folder yields the target.

A folder is modelled as a flat manifest (path -> Entry) and the plan is run by a tiny pure
interpreter of its actions. The interpreter also checks what the real apply step relies on:
a thing is created only inside a directory that exists, and a path is deleted before something of
another kind is created in its place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.errors import PathNotInSnapshotError
from tillage.core.models import ContentKind, Entry, EntryFlag, EntryKind
from tillage.core.paths import ancestors, covers
from tillage.core.rewind_plan import Action, Op, plan_actions
from tillage.core.treediff import diff_manifests

Manifest = dict[str, Entry]

NAMES = ("a", "b", "c")
MODES = (0o644, 0o755)
MTIMES = (1_000, 2_000)
XATTRS: tuple[tuple[tuple[bytes, bytes], ...], ...] = ((), ((b"user.k", b"v"),))
FILE_CONTENTS = ((b"\x01" * 32, 3), (b"\x02" * 32, 5))  # (chunk id, size)
LINK_TARGETS = (b"t1", b"t2")
TREE_IDS = (b"\x0a" * 32, b"\x0b" * 32)

paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
metas = st.tuples(st.sampled_from(MODES), st.sampled_from(MTIMES), st.sampled_from(XATTRS))


@st.composite
def entries(draw: st.DrawFn, path: str, kind: EntryKind) -> Entry:
    """An entry at `path` of `kind`, drawn from small pools so equal entries are common."""
    mode, mtime, xattrs = draw(metas)
    name = path.rsplit("/", 1)[-1].encode()
    if kind is EntryKind.DIR:
        content = draw(st.sampled_from(TREE_IDS))
        return Entry(name, kind, mode, 0, mtime, ContentKind.TREE, content, xattrs)
    if kind is EntryKind.FILE:
        content, size = draw(st.sampled_from(FILE_CONTENTS))
        flags = draw(st.sampled_from([EntryFlag.NONE, EntryFlag.NONE, EntryFlag.SQLITE_IMAGE]))
        return Entry(name, kind, mode, size, mtime, ContentKind.CHUNK, content, xattrs, flags)
    if kind is EntryKind.SYMLINK:
        target = draw(st.sampled_from(LINK_TARGETS))
        return Entry(name, kind, 0o777, len(target), mtime, ContentKind.TARGET, target)
    return Entry(name, kind, mode, 0, mtime, ContentKind.NONE, b"")


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    """A consistent folder: every parent of a path is there, as a directory."""
    kinds = draw(
        st.dictionaries(
            paths,
            st.sampled_from(
                [
                    EntryKind.FILE,
                    EntryKind.FILE,
                    EntryKind.DIR,
                    EntryKind.SYMLINK,
                    EntryKind.SPECIAL,
                ]
            ),
            max_size=10,
        )
    )
    for path in list(kinds):
        for parent in ancestors(path):
            kinds[parent] = EntryKind.DIR
    return {path: draw(entries(path, kind)) for path, kind in sorted(kinds.items())}


@st.composite
def edited(draw: st.DrawFn, base: Manifest) -> Manifest:
    """`base` with some entries' metadata or content changed and some subtrees removed."""
    out = dict(base)
    for path in sorted(base):
        if path not in out:
            continue
        what = draw(st.sampled_from(["keep", "keep", "meta", "redraw", "delete"]))
        if what == "meta":
            mode, mtime, xattrs = draw(metas)
            out[path] = replace(out[path], mode=mode, mtime_ns=mtime, xattrs=xattrs)
        elif what == "redraw":
            out[path] = draw(entries(path, out[path].kind))
        elif what == "delete":
            for other in [p for p in out if covers(path, p)]:
                del out[other]
    return out


@st.composite
def folder_pairs(draw: st.DrawFn) -> tuple[Manifest, Manifest]:
    """(current, target): unrelated folders, or one an edit of the other."""
    current = draw(manifests())
    target = draw(st.one_of(manifests(), edited(current)))
    if draw(st.booleans()):
        return current, target
    return target, current


@st.composite
def scoped_pairs(draw: st.DrawFn) -> tuple[Manifest, Manifest, list[str]]:
    current, target = draw(folder_pairs())
    if not target:
        target = {"a": draw(entries("a", EntryKind.FILE))}
    scopes = draw(st.lists(st.sampled_from(sorted(target)), min_size=1, max_size=3))
    return current, target, scopes


# -- the interpreter -----------------------------------------------------------------------


def _parent_is_a_directory(state: Manifest, path: str) -> bool:
    parent = path.rpartition("/")[0]
    return not parent or (parent in state and state[parent].kind is EntryKind.DIR)


def apply_actions(current: Manifest, actions: Iterable[Action]) -> Manifest:
    """Runs a plan on a modelled folder, checking each action is safe where it happens."""
    state = dict(current)
    for action in actions:
        path, want, live = action.path, action.entry, state.get(action.path)
        if action.op is Op.DELETE:
            for other in [p for p in state if covers(path, p)]:
                del state[other]
            continue
        assert want is not None, action
        if action.op is Op.SET_META:
            assert live is not None and live.kind is want.kind, action
            state[path] = replace(live, mode=want.mode, mtime_ns=want.mtime_ns, xattrs=want.xattrs)
            continue
        assert _parent_is_a_directory(state, path), action
        if action.op is Op.MAKE_DIR:
            assert want.kind is EntryKind.DIR, action
            assert live is None or live.kind is EntryKind.DIR, action
        else:
            assert action.op is Op.WRITE, action
            assert want.kind in (EntryKind.FILE, EntryKind.SYMLINK), action
            assert live is None or live.kind is want.kind, action
        state[path] = want
    return state


def _normal(entry: Entry | None) -> Entry | None:
    """A directory's content is its children's tree ID, which the children decide: drop it."""
    if entry is not None and entry.kind is EntryKind.DIR:
        return replace(entry, content=b"")
    return entry


def _comparable(state: Manifest, target: Manifest, keep: Sequence[str] | None = None) -> Manifest:
    """`state` without the paths the target holds as special files (never recreated)."""
    return {
        p: e
        for p, e in state.items()
        if not (p in target and target[p].kind is EntryKind.SPECIAL)
        and (keep is None or any(covers(s, p) for s in keep))
    }


def _normalised(state: Manifest) -> dict[str, Entry | None]:
    return {p: _normal(e) for p, e in state.items()}


# -- properties ----------------------------------------------------------------------------


@examples(120)
@given(folder_pairs())
def test_applying_the_plan_to_the_current_folder_yields_exactly_the_target(
    pair: tuple[Manifest, Manifest],
) -> None:
    current, target = pair
    result = apply_actions(current, plan_actions(current, target).actions)
    assert _normalised(_comparable(result, target)) == _normalised(_comparable(target, target))


@examples(120)
@given(scoped_pairs())
def test_a_scoped_plan_yields_the_target_inside_the_scopes_and_touches_nothing_else(
    case: tuple[Manifest, Manifest, list[str]],
) -> None:
    current, target, scopes = case
    result = apply_actions(current, plan_actions(current, target, scopes).actions)
    assert _normalised(_comparable(result, target, scopes)) == _normalised(
        _comparable(target, target, scopes)
    )
    parents = {a for s in scopes for a in ancestors(s)}
    for path in sorted(current.keys() | result.keys()):
        if any(covers(s, path) for s in scopes):
            continue
        if path in parents:
            # A scope's folders are put back when they are missing or not folders.
            live = current.get(path)
            if live is not None and live.kind is EntryKind.DIR:
                assert result[path] == live
            else:
                assert result[path] == target[path]
        else:
            assert result.get(path) == current.get(path), path


@examples(80)
@given(folder_pairs())
def test_without_scopes_the_plans_changes_are_the_diff_of_the_two_folders(
    pair: tuple[Manifest, Manifest],
) -> None:
    current, target = pair
    assert list(plan_actions(current, target).changes) == diff_manifests(current, target)


@examples(80)
@given(scoped_pairs())
def test_with_scopes_the_plans_changes_are_the_diff_inside_the_scopes(
    case: tuple[Manifest, Manifest, list[str]],
) -> None:
    current, target, scopes = case
    inside = [c for c in diff_manifests(current, target) if any(covers(s, c.path) for s in scopes)]
    assert list(plan_actions(current, target, scopes).changes) == inside


def _orders_safely(actions: Sequence[Action]) -> None:
    index: dict[tuple[Op, str], list[int]] = {}
    for i, a in enumerate(actions):
        index.setdefault((a.op, a.path), []).append(i)
    for i, a in enumerate(actions):
        if a.op is Op.DELETE:
            for op in (Op.MAKE_DIR, Op.WRITE):
                assert all(i < j for j in index.get((op, a.path), [])), (a, actions)
            # Deepest first: nothing below a deleted path is deleted after it.
            assert not any(
                b.op is Op.DELETE and b.path != a.path and covers(a.path, b.path)
                for b in actions[i + 1 :]
            )
    ops = [a.op for a in actions]
    creating = [i for i, op in enumerate(ops) if op in (Op.MAKE_DIR, Op.WRITE)]
    deleting = [i for i, op in enumerate(ops) if op is Op.DELETE]
    assert not deleting or not creating or max(deleting) < min(creating)
    dir_metas = [
        i
        for i, a in enumerate(actions)
        if a.op is Op.SET_META and a.entry is not None and a.entry.kind is EntryKind.DIR
    ]
    # A folder's metadata is set after everything written into it, deepest folder first.
    assert not creating or not dir_metas or max(creating) < min(dir_metas)
    depths = [actions[i].path.count("/") for i in dir_metas]
    assert depths == sorted(depths, reverse=True)


@examples(80)
@given(folder_pairs())
def test_deletions_come_first_deepest_first_and_folder_metadata_comes_last(
    pair: tuple[Manifest, Manifest],
) -> None:
    current, target = pair
    _orders_safely(plan_actions(current, target).actions)


@examples(60)
@given(scoped_pairs())
def test_a_scoped_plan_is_ordered_as_safely_as_a_whole_one(
    case: tuple[Manifest, Manifest, list[str]],
) -> None:
    current, target, scopes = case
    _orders_safely(plan_actions(current, target, scopes).actions)


@examples(60)
@given(folder_pairs())
def test_every_folder_the_plan_creates_also_gets_its_metadata_set(
    pair: tuple[Manifest, Manifest],
) -> None:
    current, target = pair
    actions = plan_actions(current, target).actions
    made = {a.path for a in actions if a.op is Op.MAKE_DIR}
    assert made <= {a.path for a in actions if a.op is Op.SET_META}


@examples(50)
@given(manifests())
def test_a_folder_planned_against_itself_has_no_changes_and_nothing_to_write_or_delete(
    folder: Manifest,
) -> None:
    planned = plan_actions(folder, folder)
    assert planned.changes == ()
    assert {a.op for a in planned.actions} <= {Op.SET_META}


@examples(50)
@given(folder_pairs(), paths)
def test_a_scope_that_names_nothing_in_the_target_is_refused(
    pair: tuple[Manifest, Manifest], scope: str
) -> None:
    current, target = pair
    if scope in target:
        return
    with pytest.raises(PathNotInSnapshotError):
        plan_actions(current, target, [scope])
    with pytest.raises(PathNotInSnapshotError):
        plan_actions(current, target, [*sorted(target)[:1], scope])


def test_a_special_file_in_the_target_is_never_recreated() -> None:
    special = Entry(b"fifo", EntryKind.SPECIAL, 0o644, 0, 1, ContentKind.NONE, b"")
    planned = plan_actions({}, {"fifo": special})
    assert planned.actions == ()
    assert [c.path for c in planned.changes] == ["fifo"]


def test_a_scoped_rewind_that_recreates_a_parent_folder_also_restores_its_metadata() -> None:
    folder = Entry(b"a", EntryKind.DIR, 0o755, 0, 1_000, ContentKind.TREE, TREE_IDS[0])
    content, size = FILE_CONTENTS[0]
    file = Entry(b"b", EntryKind.FILE, 0o644, size, 2_000, ContentKind.CHUNK, content)
    actions = plan_actions({}, {"a": folder, "a/b": file}, ["a/b"]).actions
    assert Action(Op.MAKE_DIR, "a", folder) in actions
    assert Action(Op.SET_META, "a", folder) in actions


# -- hard links ------------------------------------------------------------------------------


def _file(name: str, content: bytes, link: str = "") -> Entry:
    return Entry(
        name.rsplit("/", 1)[-1].encode(),
        EntryKind.FILE,
        0o644,
        3,
        1_000,
        ContentKind.CHUNK,
        content,
        flags=EntryFlag.HARDLINK if link else EntryFlag.NONE,
        link=link.encode(),
    )


X, Y = FILE_CONTENTS[0][0], FILE_CONTENTS[1][0]


def test_two_separate_files_and_two_names_of_one_file_are_different_folders() -> None:
    current = {"a": _file("a", X), "b": _file("b", X)}
    target = {"a": _file("a", X), "b": _file("b", X, link="a")}
    planned = plan_actions(current, target)
    assert [c.path for c in planned.changes] == ["b"]
    assert planned.actions == (Action(Op.WRITE, "b", target["b"]),)
    back = plan_actions(target, current)
    assert back.actions == (Action(Op.WRITE, "b", current["b"]),)


def test_links_are_made_after_every_plain_file_is_written() -> None:
    target = {"z": _file("z", X), "a": _file("a", X, link="z"), "m": _file("m", Y)}
    ops = [a.path for a in plan_actions({}, target).actions]
    assert ops == ["m", "z", "a"]


def test_a_name_whose_first_name_is_written_again_is_linked_again() -> None:
    current = {"a": _file("a", X, link="z"), "z": _file("z", X)}
    target = {
        "a": _file("a", X, link="z"),
        "z": replace(_file("z", X), flags=EntryFlag.SQLITE_IMAGE),
    }
    paths = [a.path for a in plan_actions(current, target).actions if a.op is Op.WRITE]
    assert paths == ["z", "a"]


def test_a_link_whose_first_name_is_outside_the_scope_is_planned_as_a_plain_file() -> None:
    target = {"a": _file("a", X), "d": examples_dir("d"), "d/b": _file("d/b", X, link="a")}
    planned = plan_actions({}, target, ["d"])
    writes = [a for a in planned.actions if a.op is Op.WRITE]
    assert planned.unlinked == ("d/b",)
    assert [a.path for a in writes] == ["d/b"]
    assert writes[0].entry is not None and not writes[0].entry.flags & EntryFlag.HARDLINK


@pytest.mark.parametrize("link", ["../a", "/a", "d/../../a", "nowhere", "d/b", "d"])
def test_a_link_that_names_no_plain_file_of_the_snapshot_is_planned_as_a_plain_file(
    link: str,
) -> None:
    target = {"a": _file("a", X), "d": examples_dir("d"), "d/b": _file("d/b", X, link=link)}
    planned = plan_actions({}, target)
    assert planned.unlinked == ("d/b",)


def examples_dir(path: str) -> Entry:
    return Entry(path.encode(), EntryKind.DIR, 0o755, 0, 1_000, ContentKind.TREE, TREE_IDS[0])
