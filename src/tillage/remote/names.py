"""Remote names: the one shape every transport accepts, so a name means the same file, key or
S3 object everywhere and can never escape the remote's root.

A name is 1..512 characters of `[a-z0-9._/-]`, `/`-separated segments, none empty, none
longer than 255 (a file name's limit on a directory remote) and none starting with `.` (so no
`.`/`..`, and the dot-names a directory remote keeps for itself — temporary siblings and lock
files — are never names). The engine only makes keyed-hash hex names under `objects/`,
`refs/`, `leases/` and the single `config`.
"""

from __future__ import annotations

from tillage.remote.errors import InvalidRemoteNameError

__all__ = ["NAME_LIMIT", "SEGMENT_LIMIT", "check_name", "check_prefix", "is_name"]

NAME_LIMIT = 512
SEGMENT_LIMIT = 255
_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._/-")


def is_name(name: object) -> bool:
    """Tells whether `name` is a valid remote name (see the module's docstring)."""
    if not isinstance(name, str) or not 0 < len(name) <= NAME_LIMIT:
        return False
    if not _ALLOWED.issuperset(name):
        return False
    return all(
        segment and segment[0] != "." and len(segment) <= SEGMENT_LIMIT
        for segment in name.split("/")
    )


def check_name(name: object) -> str:
    """Returns `name` when it is a valid remote name; InvalidRemoteNameError otherwise."""
    if not is_name(name):
        raise InvalidRemoteNameError(f"not a remote name: {_show(name)}")
    assert isinstance(name, str)
    return name


def check_prefix(prefix: object) -> str:
    """Returns `prefix` when some valid name could start with it ("" lists everything; a
    prefix may end inside a segment or with `/`); InvalidRemoteNameError otherwise."""
    if prefix == "":
        return ""
    if not isinstance(prefix, str) or not (
        is_name(prefix) or (prefix.endswith("/") and is_name(prefix + "x"))
    ):
        raise InvalidRemoteNameError(f"not a remote name prefix: {_show(prefix)}")
    return prefix


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + f"... ({len(text)} characters)"
