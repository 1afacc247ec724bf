"""Encodes result values for the wire: the one place a dataclass becomes JSON-ready data."""

from __future__ import annotations

import dataclasses
import enum
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any


class ByteStream:
    """File content read on demand, a piece at a time, so a 1 GiB file is never held whole.

    Doors that can stream (the command line) iterate it; on the wire as a value it is base64.
    """

    def __init__(
        self,
        size: int,
        pieces: Callable[[], Iterator[bytes]],
        check: Callable[[], None] | None = None,
    ) -> None:
        self.size = size
        self._pieces = pieces
        self._check = check

    def check(self) -> None:
        """Raises the store's public error now if the content cannot be read whole, so a door
        that streams can refuse before it has printed anything."""
        if self._check is not None:
            self._check()

    def __str__(self) -> str:
        return "".join(self.base64_pieces())

    def __iter__(self) -> Iterator[bytes]:
        return self._pieces()

    def read(self) -> bytes:
        """The whole content (for callers that want it in memory)."""
        return b"".join(self._pieces())

    def base64_pieces(self) -> Iterator[str]:
        """The content as base64 text, in pieces that concatenate to one valid encoding."""
        import base64

        carry = b""
        for piece in self._pieces():
            data = carry + piece
            cut = len(data) - len(data) % 3
            carry = data[cut:]
            if cut:
                yield base64.b64encode(data[:cut]).decode()
        if carry:
            yield base64.b64encode(carry).decode()


def to_wire(value: Any) -> Any:
    """Returns `value` as plain JSON data (dict, list, str, int, float, bool, None).

    Dataclasses become objects by field name, tuples become lists, enums their value, and bytes
    (workspace paths) their file-system decoding, so every door prints the same document.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ByteStream):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_wire(value.value)
    fields = _wire_fields(type(value))
    if fields is not None:
        wired = {}
        for name, omit_none in fields:
            got = getattr(value, name)
            if got is not None or not omit_none:
                wired[name] = to_wire(got)
        return wired
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, bytes):
        return os.fsdecode(value)
    raise TypeError(f"cannot put {type(value).__name__} on the wire")


# Each dataclass's fields as (name, omit_none), asked of `dataclasses` once per class: a
# rewind's result holds thousands of changes, and `fields()` builds its tuple anew each call.
_FIELDS: dict[type, tuple[tuple[str, bool], ...] | None] = {}


def _wire_fields(cls: type) -> tuple[tuple[str, bool], ...] | None:
    """The fields of dataclass `cls` (None for any other type). A field declared with metadata
    {"omit_none": True} is left out while it is None (`remote add`'s `key`: present only when
    it was just generated)."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    fields = None
    if dataclasses.is_dataclass(cls):
        fields = tuple((f.name, bool(f.metadata.get("omit_none"))) for f in dataclasses.fields(cls))
    _FIELDS[cls] = fields
    return fields
