"""Progress of a long operation, as one value every door can show (a CLI bar, MCP notices).

Engines report through a `ProgressFn` sink; hosts decide whether and how to show it. Engines may
call the sink often: a host throttles what it draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """How far one stage of an operation has got; a total of 0 means not known yet."""

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
    seal counted) raise it, so a line never reads 5,100/5,000. `done()` reports the final
    numbers once more, so the last line a person sees is the stage's end, not a count short.
    """

    __slots__ = ("bytes", "bytes_total", "files", "files_total", "sink", "stage", "unit")

    def __init__(
        self,
        sink: ProgressFn,
        stage: str,
        files_total: int = 0,
        bytes_total: int = 0,
        unit: str = "file",
    ) -> None:
        self.sink = sink
        self.stage = stage
        self.unit = unit
        self.files_total = files_total
        self.bytes_total = bytes_total
        self.files = 0
        self.bytes = 0
        self._send()

    def __call__(self, files: int, bytes_done: int = 0) -> None:
        """Reports `files` and `bytes_done` done so far (absolute counts, not increments)."""
        self.files, self.bytes = files, bytes_done
        self._send()

    def add(self, files: int = 1, bytes_done: int = 0) -> None:
        """Reports `files` and `bytes_done` more done."""
        self.files += files
        self.bytes += bytes_done
        self._send()

    def done(self) -> None:
        self._send()

    def _send(self) -> None:
        files_total = max(self.files_total, self.files) if self.files_total else 0
        bytes_total = max(self.bytes_total, self.bytes) if self.bytes_total else 0
        self.sink(Progress(self.stage, self.files, files_total, self.bytes, bytes_total, self.unit))


def meter(
    sink: ProgressFn | None,
    stage: str,
    files_total: int = 0,
    bytes_total: int = 0,
    unit: str = "file",
) -> Meter | None:
    """A Meter on `sink`, or None when nobody listens (so an engine's hot loop tests one name)."""
    return None if sink is None else Meter(sink, stage, files_total, bytes_total, unit)


def relabel(sink: ProgressFn | None, stage: str) -> ProgressFn | None:
    """`sink`, with every report's stage named `stage` (an estimate's walk is a seal's walk,
    but it seals nothing: it is `scanning`); a PAUSE passes as it is."""
    if sink is None:
        return None
    import dataclasses

    target = sink
    return lambda p: target(dataclasses.replace(p, stage=stage) if p.stage else p)  # PAUSE
