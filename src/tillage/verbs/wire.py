"""Encodes result values for the wire: the one place a dataclass becomes JSON-ready data."""

from __future__ import annotations

import dataclasses
import enum
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def to_wire(value: Any) -> Any:
    """Returns `value` as plain JSON data (dict, list, str, int, float, bool, None).

    Dataclasses become objects by field name, tuples become lists, enums their value, and bytes
    (workspace paths) their file-system decoding, so every door prints the same document.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_wire(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, bytes):
        return os.fsdecode(value)
    raise TypeError(f"cannot put {type(value).__name__} on the wire")
