"""How a rewind hands its files to the writer threads: in order, in bounded groups."""

from __future__ import annotations

from tillage.core.rewind_plan import GROUP_BYTES, GROUP_FILES, grouped, parted


def test_groups_keep_the_order_and_are_bounded_by_count_and_by_bytes() -> None:
    sizes = [10] * (GROUP_FILES * 2 + 3) + [GROUP_BYTES, 1, 1]

    groups = grouped(list(enumerate(sizes)), lambda item: item[1])

    assert [i for group in groups for i, _size in group] == list(range(len(sizes)))
    assert all(len(group) <= GROUP_FILES for group in groups)
    assert [len(g) for g in groups[:3]] == [GROUP_FILES, GROUP_FILES, 3 + 1]
    # A group closes once it holds GROUP_BYTES: the big file's followers start the next one.
    assert [size for _i, size in groups[-1]] == [1, 1]


def test_nothing_to_group_gives_no_group() -> None:
    assert grouped([], lambda item: 0) == []


def test_files_at_the_bound_or_above_are_set_apart_each_side_in_order() -> None:
    sizes = [5, 100, 99, 3, 101, 100]

    large, small = parted(sizes, lambda size: size, 100)

    assert large == [100, 101, 100]
    assert small == [5, 99, 3]
