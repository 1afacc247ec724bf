"""MemoryRemote: a remote in this process's memory, for tests and for the engine's own checks.

`memory://NAME` names one shared space per process, so a test can open the same remote twice
(two "machines" in one process) and see what the other wrote. Thread-safe: one lock per space.
"""

from __future__ import annotations

import threading

from tillage.platform.names import random_hex
from tillage.remote.base import Versioned, content_token, slice_range
from tillage.remote.errors import RemoteMissingError
from tillage.remote.names import check_name, check_prefix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MemoryRemote", "discard_space"]


class _Space:
    __slots__ = ("lock", "objects")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, bytes] = {}


_SPACES: dict[str, _Space] = {}
_SPACES_LOCK = threading.Lock()


def _space(name: str) -> _Space:
    with _SPACES_LOCK:
        space = _SPACES.get(name)
        if space is None:
            space = _SPACES[name] = _Space()
        return space


def discard_space(name: str) -> None:
    """Forgets the shared space `memory://name` (its bytes go when no remote holds it)."""
    with _SPACES_LOCK:
        _SPACES.pop(name, None)


class MemoryRemote:
    """A remote held in a dict. `MemoryRemote("x")` and `open_remote("memory://x", ...)` share
    one space; `MemoryRemote()` makes a fresh one with a random name."""

    def __init__(self, name: str | None = None) -> None:
        self.space_name = name if name is not None else f"anon-{random_hex(8)}"
        self.url = f"memory://{self.space_name}"
        self._space = _space(self.space_name)

    def exists(self, names: Sequence[str]) -> set[str]:
        """Returns which of `names` are present."""
        for name in names:
            check_name(name)
        with self._space.lock:
            objects = self._space.objects
            return {name for name in names if name in objects}

    def put(self, name: str, data: bytes) -> None:
        """Stores a copy of `data` under `name`."""
        check_name(name)
        copy = bytes(data)
        with self._space.lock:
            self._space.objects[name] = copy

    def get(self, name: str) -> bytes:
        """Returns `name`'s bytes; RemoteMissingError when absent."""
        check_name(name)
        with self._space.lock:
            data = self._space.objects.get(name)
        if data is None:
            raise RemoteMissingError(name, self.url)
        return data

    def get_range(self, name: str, offset: int, length: int) -> bytes:
        """Returns the range of `name`'s bytes (see `Remote.get_range`)."""
        return slice_range(self.get(name), offset, length)

    def list(self, prefix: str) -> list[str]:
        """Returns the names starting with `prefix`, sorted."""
        check_prefix(prefix)
        with self._space.lock:
            names = [name for name in self._space.objects if name.startswith(prefix)]
        names.sort()
        return names

    def delete(self, name: str) -> None:
        """Removes `name` if present."""
        check_name(name)
        with self._space.lock:
            self._space.objects.pop(name, None)

    def read_versioned(self, name: str) -> Versioned | None:
        """Returns `name`'s bytes and content token; None when absent."""
        check_name(name)
        with self._space.lock:
            data = self._space.objects.get(name)
        return None if data is None else Versioned(data, content_token(data))

    def write_if(self, name: str, data: bytes, expect: str | None) -> bool:
        """Writes `data` if `name` is absent (`expect` None) or holds the version `expect`."""
        check_name(name)
        copy = bytes(data)
        with self._space.lock:
            current = self._space.objects.get(name)
            if expect is None:
                if current is not None:
                    return False
            elif current is None or content_token(current) != expect:
                return False
            self._space.objects[name] = copy
            return True

    def close(self) -> None:
        """Nothing to release: the space lives until discard_space()."""
