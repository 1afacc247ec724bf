"""The bisect search (core.bisect): over any timeline and any skips, it finds the first bad
snapshot, in logarithmically many probes, and never probes a snapshot twice or outside the range.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.bisect import Search, Verdict, verdict_of


def run(
    search: Search, verdicts: list[Verdict], limit: int | None = None
) -> tuple[Search, list[int]]:
    """Drives the search with a fixed verdict per position, as the probes would answer."""
    probed: list[int] = []
    while (position := search.next_probe()) is not None:
        if limit is not None and len(probed) >= limit:
            break
        assert search.good < position < search.bad
        assert position not in probed
        probed.append(position)
        search = search.record(position, verdicts[position])
    return search, probed


@st.composite
def monotone(draw: st.DrawFn) -> tuple[list[Verdict], int]:
    """A timeline that breaks at one position and stays broken, some positions untestable."""
    count = draw(st.integers(min_value=2, max_value=300))
    first_bad = draw(st.integers(min_value=1, max_value=count - 1))
    inner = st.integers(min_value=1, max_value=count - 2) if count > 2 else st.nothing()
    skips = draw(st.sets(inner, max_size=count // 3))
    verdicts = [
        Verdict.SKIP if p in skips else (Verdict.BAD if p >= first_bad else Verdict.GOOD)
        for p in range(count)
    ]
    return verdicts, first_bad


@examples(300)
@given(st.integers(min_value=2, max_value=5000), st.data())
def test_without_skips_it_finds_the_first_bad_in_log_probes(
    count: int, data: st.DataObject
) -> None:
    first_bad = data.draw(st.integers(min_value=1, max_value=count - 1))
    verdicts = [Verdict.BAD if p >= first_bad else Verdict.GOOD for p in range(count)]
    search, probed = run(Search.start(count), verdicts)
    assert search.exact and search.finished
    assert (search.good, search.bad) == (first_bad - 1, first_bad)
    assert search.candidates() == (first_bad,)
    assert len(probed) <= math.ceil(math.log2(count - 1)) if count > 2 else not probed


@examples(300)
@given(monotone())
def test_with_skips_the_first_bad_is_among_the_candidates(case: tuple[list[Verdict], int]) -> None:
    verdicts, first_bad = case
    search, _ = run(Search.start(len(verdicts)), verdicts)
    assert search.finished
    assert first_bad in search.candidates()
    # Every candidate but the bad end was skipped: nothing testable was left untested.
    assert all(verdicts[p] is Verdict.SKIP for p in search.candidates()[:-1])
    assert verdicts[search.bad] is Verdict.BAD
    assert search.good == 0 or verdicts[search.good] is Verdict.GOOD
    if search.exact:
        assert search.bad == first_bad


@examples(200)
@given(st.lists(st.sampled_from(list(Verdict)), min_size=2, max_size=200))
def test_any_answers_end_in_a_good_bad_pair_with_only_skips_between(
    answers: list[Verdict],
) -> None:
    """A check that is not monotone (flaky, or broken and fixed twice) still ends the search: on
    a good position followed by a bad one, everything between them skipped."""
    search, probed = run(Search.start(len(answers)), answers)
    assert len(probed) == len(set(probed)) <= len(answers) - 2
    assert search.good < search.bad
    assert search.good == 0 or answers[search.good] is Verdict.GOOD
    assert search.bad == len(answers) - 1 or answers[search.bad] is Verdict.BAD
    assert all(answers[p] is Verdict.SKIP for p in range(search.good + 1, search.bad))


@examples(100)
@given(monotone(), st.integers(min_value=0, max_value=6))
def test_a_limit_leaves_a_narrowed_range_that_still_holds_the_answer(
    case: tuple[list[Verdict], int], limit: int
) -> None:
    verdicts, first_bad = case
    search, probed = run(Search.start(len(verdicts)), verdicts, limit=limit)
    assert len(probed) <= limit
    assert first_bad in search.candidates()
    assert search.good < first_bad <= search.bad
    if not search.finished:
        assert search.steps_left() >= 1


def test_skipped_middle_probes_a_neighbour() -> None:
    search = Search.start(11)
    assert search.next_probe() == 5
    search = search.record(5, Verdict.SKIP)
    assert search.next_probe() == 4
    search = search.record(4, Verdict.SKIP)
    assert search.next_probe() == 6


def test_record_refuses_a_position_outside_the_range() -> None:
    search = Search.start(5).record(2, Verdict.BAD)
    for position in (0, 2, 3, 4):
        try:
            search.record(position, Verdict.GOOD)
        except ValueError:
            continue
        raise AssertionError(f"position {position} was accepted")


def test_exit_statuses_read_as_git_bisect_run_reads_them() -> None:
    assert verdict_of(0) is Verdict.GOOD
    assert verdict_of(125) is Verdict.SKIP
    assert {verdict_of(code) for code in (1, 2, 3, 124, 126, 127)} == {Verdict.BAD}
    assert {verdict_of(code) for code in (128, 130, 255, -9, -2)} == {None}
