"""open_remote: a remote URL as a person writes it, turned into the transport that serves it.

Forms: a folder path (absolute, relative to `cwd`, `~/…`, or `file:///…`); `memory://NAME`
(one shared space per process, for tests); `ssh://[user@]host[:port]/path` and
`s3://bucket[/prefix]`, whose transports are imported only when such a URL is opened. The
environment comes in as a mapping (the host reads the process's, nothing here does), for
`TILLAGE_SSH`, `TILLAGE_REMOTE_TILL`, the AWS variables and `TILLAGE_S3_*`.
"""

from __future__ import annotations

from tillage.errors import echo
from tillage.platform.homes import absolute, expand_user
from tillage.remote.errors import BadRemoteUrlError, RemoteUnavailableError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from tillage.remote.base import Remote

__all__ = ["open_remote", "remote_kind"]

_MEMORY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# scheme -> (module below tillage.remote, class with from_url(url, env))
_TRANSPORTS = {"ssh": ("ssh", "SshRemote"), "s3": ("s3", "S3Remote")}


def remote_kind(url: str) -> str:
    """Returns which transport serves `url`: "directory", "memory", "ssh" or "s3";
    BadRemoteUrlError for anything else (checked without opening anything)."""
    if not url or url != url.strip() or "\0" in url or "\n" in url:
        raise BadRemoteUrlError(f"not a remote URL: {echo(url)}")
    scheme, sep, _rest = url.partition("://")
    if not sep:
        head = url.split("/", 1)[0]
        if ":" in head and not url.startswith(("./", "~")):
            # host:path, as scp and git write it: ssh needs its URL form here.
            raise BadRemoteUrlError(
                f"{echo(url)} looks like host:path; write ssh://host/path "
                "(or ./NAME for a folder whose name holds a colon)"
            )
        return "directory"
    kind = scheme.lower()
    if kind == "file":
        return "directory"
    if kind == "memory" or kind in _TRANSPORTS:
        return kind
    raise BadRemoteUrlError(f"tillage has no {kind}:// remotes: {echo(url)}")


def open_remote(url: str, env: Mapping[str, str], cwd: str) -> Remote:
    """Returns the remote `url` names, ready to use. BadRemoteUrlError for a URL that names
    nothing tillage can open; RemoteUnavailableError when the transport cannot reach it."""
    kind = remote_kind(url)
    if kind == "directory":
        from tillage.remote.directory import DirectoryRemote

        path = _folder_path(url, env, cwd)
        return DirectoryRemote(path, url=path)
    if kind == "memory":
        from tillage.remote.memory import MemoryRemote

        name = url.partition("://")[2]
        if not name or not _MEMORY_CHARS.issuperset(name):
            raise BadRemoteUrlError(f"a memory remote is memory://NAME: {echo(url)}")
        return MemoryRemote(name)
    return _transport(kind, url, env)


def _folder_path(url: str, env: Mapping[str, str], cwd: str) -> str:
    """The absolute folder a path or file:// URL names (symlinks kept, `..` kept)."""
    if url.lower().startswith("file://"):
        from urllib.parse import unquote

        rest = url[len("file://") :]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest.startswith("/"):
            raise BadRemoteUrlError(
                f"a file URL names an absolute folder on this machine (file:///path): {echo(url)}"
            )
        path = unquote(rest)
    else:
        try:
            path = expand_user(url, env)
        except RuntimeError as exc:
            raise BadRemoteUrlError(
                f"cannot tell whose home {echo(url)} starts in", next_step="give an absolute path"
            ) from exc
    path = absolute(path, cwd)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts) if parts else "/"


def _transport(kind: str, url: str, env: Mapping[str, str]) -> Remote:
    """Opens an ssh:// or s3:// URL through its transport, imported now and only now."""
    import importlib

    module_name, class_name = _TRANSPORTS[kind]
    qualified = f"tillage.remote.{module_name}"
    try:
        module = importlib.import_module(qualified)
    except ModuleNotFoundError as exc:
        if exc.name != qualified:
            raise
        raise RemoteUnavailableError(
            f"this build of tillage has no {kind} transport yet: cannot open {echo(url)}",
            next_step="use a folder remote, or a build of tillage with the transport",
        ) from None
    remote: Remote = getattr(module, class_name).from_url(url, env)
    return remote
