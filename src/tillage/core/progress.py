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


ProgressFn = Callable[[Progress], None]
