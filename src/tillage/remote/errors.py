"""Errors of the remotes (module "sync"): what a caller sees when a remote cannot be used.

Every `Remote` method answers only these (and InvalidRemoteNameError, a bug): a transport's own
failures (ssh, HTTP, the file system) are turned into RemoteUnavailableError with the remote's
URL and the reason, never a traceback.
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError, TillageError

__all__ = [
    "BadRemoteUrlError",
    "InvalidRemoteNameError",
    "RemoteMissingError",
    "RemoteProtocolError",
    "RemoteUnavailableError",
]


class RemoteUnavailableError(TillageError):
    """The remote cannot be reached or used: ssh failed, the connection was refused, the bucket
    or folder is missing or not ours to write. The message names the remote and the reason."""

    code = -32290
    name = "sync.remote_unavailable"
    module = "sync"
    next_step = (
        "check that the remote is reachable and that you may read and write it "
        "(the path, host, bucket or credentials), then retry"
    )


class RemoteProtocolError(TillageError):
    """The far side answered something that is not this protocol: another version of tillage
    on the far side, or a helper that died mid-frame."""

    code = -32291
    name = "sync.remote_protocol"
    module = "sync"
    next_step = (
        "install the same version of tillage on the far side (or name it with --remote-till "
        "or TILLAGE_REMOTE_TILL), then retry"
    )


class BadRemoteUrlError(InvalidArgumentError):
    """The remote's URL is not one tillage understands."""

    code = -32292
    name = "sync.bad_url"
    module = "sync"
    next_step = (
        "give a folder path, ssh://[user@]host[:port]/path or s3://bucket[/prefix] "
        "(plain http only with TILLAGE_S3_ALLOW_HTTP=1)"
    )


class RemoteMissingError(Exception):
    """The name is absent from the remote. Not public: the sync engine expects it (a ref not
    pushed yet) and decides what it means."""

    def __init__(self, name: str, url: str = "") -> None:
        where = f" on {url}" if url else ""
        super().__init__(f"{name!r} is not on the remote{where}")
        self.name = name
        self.url = url


class InvalidRemoteNameError(ValueError):
    """A remote name or prefix outside the allowed shape (`names.check_name`). The engine only
    makes valid names, so this is a bug where it happens, never a user's mistake."""
