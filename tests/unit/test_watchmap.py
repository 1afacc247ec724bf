"""The watcher's map of watch descriptors: forgetting a folder forgets exactly what a scan of
every watched path for its prefix would, at the cost of the subtree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tillage.watch.watchmap import WatchMap


def _model_forget(model: dict[str, int], rel: str) -> list[int]:
    """The old rule, by a scan of every watch: `rel`, everything below it, or all for ""."""
    gone = [r for r in model if not rel or r == rel or r.startswith(rel + "/")]
    return [model.pop(r) for r in gone]


def _model_add(model: dict[str, int], rel: str, wd: int) -> None:
    for old, known in list(model.items()):
        if known == wd and old != rel:
            del model[old]  # the kernel's answer for a folder already watched: it moved
    model[rel] = wd


def test_forgetting_a_folder_forgets_its_subtree_and_not_a_sibling_sharing_its_prefix() -> None:
    watches = WatchMap()
    for wd, rel in enumerate(["", "a", "a/b", "a/b/c", "ab", "ab/x", "b"]):
        watches.add(rel, wd)

    assert sorted(watches.forget_tree("a")) == [1, 2, 3]

    assert sorted(watches.rels()) == ["", "ab", "ab/x", "b"]
    assert watches.folder(2) is None and watches.folder(4) == "ab"
    assert watches.forget_tree("a") == []  # forgotten once, nothing is left to remove


def test_a_folder_seen_under_a_new_name_is_forgotten_with_either_parent() -> None:
    watches = WatchMap()
    for wd, rel in enumerate(["", "old", "old/kid"]):
        watches.add(rel, wd)
    watches.add("new", 1)  # `mv old new`: the kernel answers with old's descriptor

    assert "old" not in watches and watches.folder(1) == "new"
    # old/kid's watch was added under the old name: forgetting that name reaches it.
    assert watches.forget_tree("old") == [2]
    assert sorted(watches.rels()) == ["", "new"]


def test_forgetting_all_but_the_workspace_folder_keeps_its_watch() -> None:
    watches = WatchMap()
    for wd, rel in enumerate(["", "a", "a/b", "c"]):
        watches.add(rel, wd)

    assert sorted(watches.forget_all_but_root()) == [1, 2, 3]

    assert list(watches.rels()) == [""] and watches.folder(0) == ""
    watches.add("d", 9)  # the map is whole again: a new folder under the root is linked
    assert watches.forget_tree("d") == [9]
    assert sorted(watches.forget_tree("")) == [0]
    assert len(watches) == 0


_NAMES = st.sampled_from(["a", "b", "ab"])
_RELS = st.lists(_NAMES, min_size=0, max_size=3).map("/".join)
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _RELS, st.integers(0, 12)),
        st.tuples(st.just("forget"), _RELS, st.just(0)),
        st.tuples(st.just("release"), st.just(""), st.just(0)),
    ),
    max_size=40,
)


@given(_STEPS)
def test_the_map_answers_as_a_scan_of_every_watch_would(
    steps: list[tuple[str, str, int]],
) -> None:
    watches, model = WatchMap(), {}
    for op, rel, wd in steps:
        if op == "add":
            watches.add(rel, wd)
            _model_add(model, rel, wd)
        elif op == "forget":
            assert sorted(watches.forget_tree(rel)) == sorted(_model_forget(model, rel))
        else:
            root = model.get("")
            expected = [w for r, w in model.items() if r]
            model = {"": root} if root is not None else {}
            assert sorted(watches.forget_all_but_root()) == sorted(expected)
        assert sorted(watches.rels()) == sorted(model)
        assert all(watches.folder(w) == r for r, w in model.items())
        assert len(watches) == len(model)
