"""The bisect verb: the first snapshot where a check fails, probed in disposable forks."""

from __future__ import annotations

from tillage.verbs.contract import Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERBS: tuple[Verb[Any, Any], ...] = ()
