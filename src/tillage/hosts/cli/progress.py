"""Progress of a long operation, drawn on one stderr line per stage for a person at a terminal.

The engine reports `tillage.core.progress.Progress` values as often as it likes (once per file
read today); this printer decides what a person sees: nothing for a stage that ends within
`delay` (a second) of its first report, then one line redrawn at most every `interval` (a tenth
of a second) with the stage, files and bytes done (out of their totals when known), the rate,
and an ETA when a total is known. A new stage or the end redraws the line with the stage's last
numbers (its final ones: engines report a stage's end) and ends it with a newline, so each
stage that took long leaves one line, finished. The host creates it only when stderr is a
terminal and `--json` is off (CONTRACT: progress only on stderr, only on a terminal); the clock
and stream are injected so it is tested without waiting.
"""

from __future__ import annotations

import _thread
import time

from tillage.hosts.cli import units

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from tillage.core.progress import Progress

DELAY = 1.0  # seconds of silence before the first line: quick commands show nothing
INTERVAL = 0.1  # seconds between redraws, so a fast engine never floods the terminal
_CLEAR = "\x1b[K"  # erase to the end of the line, so a shorter redraw leaves no tail


def describe(p: Progress, elapsed: float, *, final: bool = False) -> str:
    """Returns one progress line: `sealing  1,234 files  250 MiB  48.2 MiB/s`, with totals
    `applying  1,234/5,000 files  250 MiB/1.2 GiB  48.2 MiB/s  ETA 20 s`; a `final` line (the
    stage is over) has no ETA."""
    unit = p.unit or "file"
    files = (
        f"{p.files_done:,}/{p.files_total:,} {unit}s"
        if p.files_total
        else (units.count(p.files_done, unit))
    )
    parts = [p.stage, files]
    if p.bytes_done or p.bytes_total or unit == "file":
        data = units.size(p.bytes_done)
        if p.bytes_total:
            data += f"/{units.size(p.bytes_total)}"
        parts.append(data)
    rate = p.bytes_done / elapsed if elapsed > 0 else 0.0
    if rate >= 1:  # below a byte a second it tells nothing (a warm seal reads almost nothing)
        parts.append(f"{units.size(rate)}/s")
    eta = None if final else _eta(p, elapsed, rate)
    if eta is not None:
        parts.append(f"ETA {units.duration(eta)}")
    return "  ".join(parts)


def _eta(p: Progress, elapsed: float, rate: float) -> float | None:
    """Seconds left, from bytes when their total is known, else from files; None if unknown."""
    if p.bytes_total and rate > 0:
        return max(0, p.bytes_total - p.bytes_done) / rate
    if p.files_total and p.files_done and elapsed > 0:
        return max(0, p.files_total - p.files_done) * elapsed / p.files_done
    return None


class ProgressPrinter:
    """A `ProgressFn` that draws at most ~10 lines a second, and only after the first second."""

    def __init__(
        self,
        stream: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        delay: float = DELAY,
        interval: float = INTERVAL,
        width: int | None = None,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.delay = delay
        self.interval = interval
        self.width = width if width is not None else _width(stream)
        self.started = clock()
        self.stage_started = self.started
        self.last: Progress | None = None
        self.last_at = self.started  # when the last report came
        self.drawn_at: float | None = None  # when the current line was last drawn
        self.lines = 0  # lines finished with a newline
        # Engines may report from worker threads; one report at a time draws.
        self._lock = _thread.allocate_lock()

    def __call__(self, p: Progress) -> None:
        with self._lock:
            self._report(p)

    def _report(self, p: Progress) -> None:
        now = self.clock()
        last = self.last
        if not p.stage:  # PAUSE: a user's command prints next, on a line of its own
            self._end_line()
            self.last = None
            return
        if last is None or p.stage != last.stage:
            self._end_line()
            self.stage_started = now  # the delay and the rate count from a stage's own start
        self.last = p
        self.last_at = now
        if now - self.stage_started < self.delay:
            return
        if self.drawn_at is None or now - self.drawn_at >= self.interval:
            self._draw(p, now)

    def finish(self) -> None:
        """Draws the final numbers and ends the line; nothing if nothing was ever drawn."""
        with self._lock:
            self._end_line()

    def _end_line(self) -> None:
        """Ends the current stage's line with its last numbers, if it was drawn at all."""
        if self.drawn_at is not None and self.last is not None:
            self._draw(self.last, self.last_at, final=True)
            self._newline()

    def _draw(self, p: Progress, now: float, *, final: bool = False) -> None:
        line = describe(p, now - self.stage_started, final=final)
        if self.width > 1:
            line = line[: self.width - 1]
        self.stream.write("\r" + line + _CLEAR)
        self.stream.flush()
        self.drawn_at = now

    def _newline(self) -> None:
        self.stream.write("\n")
        self.stream.flush()
        self.drawn_at = None
        self.lines += 1


def _width(stream: TextIO) -> int:
    import os

    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80
