"""The seal loop's timing decision, as a pure function of clock readings."""

from __future__ import annotations

import pytest

from tillage.watch.timing import next_wake, seal_delay, storm_cap


def test_nothing_pending_means_no_seal_and_no_timer() -> None:
    assert seal_delay(100.0, None, None, 0.5) is None
    assert next_wake(100.0, None, None) == (False, None)


def test_a_change_is_sealed_after_the_quiet_time() -> None:
    assert seal_delay(10.2, 10.0, 10.0, 0.5) == pytest.approx(0.3)
    assert seal_delay(10.5, 10.0, 10.0, 0.5) == 0.0
    assert seal_delay(11.0, 10.0, 10.0, 0.5) == 0.0


def test_each_new_change_restarts_the_quiet_time() -> None:
    assert seal_delay(10.6, 10.0, 10.4, 0.5) == pytest.approx(0.3)


def test_a_storm_that_never_goes_quiet_is_sealed_at_a_bounded_interval() -> None:
    assert storm_cap(0.5) == 5.0
    assert storm_cap(0.05) == 2.0
    # events every 10 ms for 5 s: the quiet time never comes, the cap does
    assert seal_delay(14.99, 10.0, 14.99, 0.5) == pytest.approx(0.01)
    assert seal_delay(15.0, 10.0, 14.995, 0.5) == 0.0


def test_the_periodic_rescan_wakes_the_loop_when_nothing_is_pending() -> None:
    assert next_wake(10.0, None, 15.0) == (False, 5.0)
    assert next_wake(15.0, None, 15.0) == (True, None)
    assert next_wake(10.0, 0.3, 15.0) == (False, 0.3)
    assert next_wake(10.0, 0.0, 15.0) == (True, None)
