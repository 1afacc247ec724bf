"""The merge verb: three-way, gated on a check, landing nothing on a conflict."""

from __future__ import annotations

from tillage.verbs.contract import Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERBS: tuple[Verb[Any, Any], ...] = ()
