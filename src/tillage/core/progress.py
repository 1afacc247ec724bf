"""Progress of a long operation, as one value every door can show (a CLI bar, MCP notices).

Engines report through a `ProgressFn` sink; hosts decide whether and how to show it. Engines may
call the sink often: a host throttles what it draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Progress(NamedTuple):
    """How far one stage of an operation has got; a total of 0 means not known yet.

    A named tuple, not a dataclass: a seal reports once per file, and building a frozen
    dataclass costs five times as much (2 µs a report: 0.2 s of a 100,000-file seal)."""

    stage: str  # "sealing", "staging", "applying", ...
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    # What `files_done` counts, in the singular: files mostly; objects, packs or probes where
    # a stage counts those.
    unit: str = "file"


ProgressFn = Callable[[Progress], None]

PAUSE = Progress("", 0, 0, 0, 0)
"""A report with no stage: the stage reported last is over and no other has begun (a user's
command is about to print, as a bisect probe's check): a host ends its line now."""


class Meter:
    """Reports one stage's counts to a sink: the engines' one way to say how far they got.

    A total of 0 is unknown; counts that pass a total (a walk meeting more files than the last
    seal counted) raise it, so a line never reads 5,100/5,000. `every` > 1 sends a report only
    when that many more items (or BYTES_STEP more bytes) are done since the last one, for a
    loop that reports once per file of a large tree; `done()` always sends, so the last report
    is the stage's final numbers.
    """

    __slots__ = (
        "bytes",
        "bytes_total",
        "every",
        "files",
        "files_total",
        "sent_bytes",
        "sent_files",
        "sink",
        "stage",
        "unit",
    )

    def __init__(
        self,
        sink: ProgressFn,
        stage: str,
        files_total: int = 0,
        bytes_total: int = 0,
        unit: str = "file",
        every: int = 1,
    ) -> None:
        self.sink = sink
        self.stage = stage
        self.unit = unit
        self.files_total = files_total
        self.bytes_total = bytes_total
        self.every = every
        self.files = self.bytes = self.sent_files = self.sent_bytes = 0
        self._send()

    def __call__(self, files: int, bytes_done: int = 0) -> None:
        """Reports `files` and `bytes_done` done so far (absolute counts, not increments)."""
        self.files, self.bytes = files, bytes_done
        if files - self.sent_files >= self.every or bytes_done - self.sent_bytes >= BYTES_STEP:
            self._send()

    def add(self, files: int = 1, bytes_done: int = 0) -> None:
        """Reports `files` and `bytes_done` more done."""
        self(self.files + files, self.bytes + bytes_done)

    def done(self, files: int | None = None, bytes_done: int | None = None) -> None:
        """Reports the stage's final numbers (the counts so far, or those given)."""
        if files is not None:
            self.files = files
        if bytes_done is not None:
            self.bytes = bytes_done
        self._send()

    def _send(self) -> None:
        self.sent_files, self.sent_bytes = self.files, self.bytes
        files_total = max(self.files_total, self.files) if self.files_total else 0
        bytes_total = max(self.bytes_total, self.bytes) if self.bytes_total else 0
        self.sink(Progress(self.stage, self.files, files_total, self.bytes, bytes_total, self.unit))


# With `every`, a report also goes when this many more bytes are done (a large file read).
BYTES_STEP = 1 << 20


def meter(
    sink: ProgressFn | None,
    stage: str,
    files_total: int = 0,
    bytes_total: int = 0,
    unit: str = "file",
    every: int = 1,
) -> Meter | None:
    """A Meter on `sink`, or None when nobody listens (so an engine's hot loop tests one name)."""
    return None if sink is None else Meter(sink, stage, files_total, bytes_total, unit, every)


def relabel(sink: ProgressFn | None, stage: str) -> ProgressFn | None:
    """`sink`, with every report's stage named `stage` (an estimate's walk is a seal's walk,
    but it seals nothing: it is `scanning`); a PAUSE passes as it is."""
    if sink is None:
        return None
    target = sink
    return lambda p: target(p._replace(stage=stage) if p.stage else p)  # a PAUSE as it is
