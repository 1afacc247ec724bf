"""Bisecting a timeline: the pure search for the first snapshot where a check fails.

The snapshots between a known-good and a known-bad one are numbered by position, oldest first
(position 0 is the good end, the last position the bad end). The search keeps the newest
position known good, the oldest known bad, and the positions whose check could not say (a
skip, exit status 125 as in `git bisect run`); each next probe is the untried position nearest
the middle of what is left, so a skipped snapshot costs one neighbour, not the halving.

It is finished when nothing untried lies between the two: the first bad snapshot is then the
bad end, or, when skipped positions remain between them, any of those or the bad end
(`candidates`), as git says "the first bad commit could be any of". Everything here is a value:
the caller runs the probes and records their verdicts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

GOOD_EXIT = 0
SKIP_EXIT = 125
LAST_BAD_EXIT = 127


class Verdict(enum.StrEnum):
    """What one probe said about its snapshot."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


def verdict_of(exit_code: int) -> Verdict | None:
    """Reads a check's exit status the way `git bisect run` does: 0 good, 125 skip, 1..127
    (but 125) bad. None means the bisect must stop: a status above 127 (the shell's report of
    a signal, or a check that wants to abort) or a negative one (killed by a signal)."""
    if exit_code == GOOD_EXIT:
        return Verdict.GOOD
    if exit_code == SKIP_EXIT:
        return Verdict.SKIP
    if 0 < exit_code <= LAST_BAD_EXIT:
        return Verdict.BAD
    return None


@dataclass(frozen=True)
class Search:
    """Where a bisect stands over positions 0..count-1 (oldest first)."""

    count: int
    good: int
    bad: int
    skipped: frozenset[int] = frozenset()

    @classmethod
    def start(cls, count: int) -> Search:
        """A search between position 0 (known good) and count-1 (known bad)."""
        if count < 2:
            raise ValueError("a bisect needs a good and a bad end: at least 2 positions")
        return cls(count=count, good=0, bad=count - 1)

    def untried(self) -> list[int]:
        """The positions strictly between the good and the bad end not yet skipped."""
        return [p for p in range(self.good + 1, self.bad) if p not in self.skipped]

    def next_probe(self) -> int | None:
        """The position to check next (the untried one nearest the middle; the older one on a
        tie), or None when the search is finished."""
        middle = (self.good + self.bad) // 2
        for distance in range(self.bad - self.good):
            for position in (middle - distance, middle + distance):
                if self.good < position < self.bad and position not in self.skipped:
                    return position
        return None

    @property
    def finished(self) -> bool:
        """True when nothing untried lies between the good and the bad end."""
        return self.next_probe() is None

    @property
    def exact(self) -> bool:
        """True when the first bad position is known for certain: finished, no skips between."""
        return self.bad - self.good == 1

    def candidates(self) -> tuple[int, ...]:
        """The positions that may be the first bad one: skipped ones between the ends (they
        were not tested), the untried ones, and the bad end itself."""
        return (*range(self.good + 1, self.bad), self.bad)

    def steps_left(self) -> int:
        """About how many more probes the search needs (no further skips): the halvings of the
        untried positions."""
        return len(self.untried()).bit_length()

    def record(self, position: int, verdict: Verdict) -> Search:
        """The search after `position` was checked and said `verdict`."""
        if not self.good < position < self.bad:
            raise ValueError(f"position {position} is not between {self.good} and {self.bad}")
        if verdict is Verdict.GOOD:
            return replace(self, good=position)
        if verdict is Verdict.BAD:
            return replace(self, bad=position)
        return replace(self, skipped=self.skipped | {position})
