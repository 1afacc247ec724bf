"""The far side of an SSH remote: `till remote-serve --stdio PATH` answers the framed protocol
(remote/wire.py) on stdin/stdout from a directory remote at PATH, until stdin ends.

Everything a request does is the directory remote's: atomic puts, and compare-and-swap under
its flock, so two machines pushing through two helpers to one folder are serialised by the
kernel of the machine that holds it. A request that fails is answered with an error and the
loop goes on; only a stream that is no longer framed (junk, a peer that died mid-frame) ends
it. Diagnostics go to stderr (ssh hands them to the client, which quotes the last line).
"""

from __future__ import annotations

import os
import sys

from tillage.errors import TillageError
from tillage.remote.wire import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    Channel,
    FrameError,
    Header,
    PeerClosedError,
    WireError,
    join_names,
    split_names,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from tillage.remote.base import Remote

# How long a reply may wait for the client to read it: a client that stopped reading for
# this long is gone (it would have timed out itself).
REPLY_TIMEOUT = 300.0
# A list answer is sent in frames of about this size, so a remote of millions of names never
# needs one frame over MAX_PAYLOAD.
LIST_FRAME = 4 * 1024 * 1024

Reply = tuple[Header, bytes]


def serve_stdio(root: str) -> int:
    """Serves the remote at `root` on this process's stdin/stdout. Descriptor 1 is pointed at
    stderr first, so a stray print from any library lands in the diagnostics instead of
    corrupting a frame; descriptor 0 at /dev/null, so nothing else reads a request."""
    out_fd = os.dup(1)
    in_fd = os.dup(0)
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        return serve(in_fd, out_fd, root)
    finally:
        os.close(in_fd)
        os.close(out_fd)


def serve(in_fd: int, out_fd: int, root: str) -> int:
    """Answers frames read from `in_fd` on `out_fd` from a directory remote at `root`
    (made by the first write that needs it) until the client closes its end: 0 then, 1 when
    the stream broke."""
    channel = Channel(in_fd, out_fd)
    remote: Remote | None = None
    try:
        while True:
            try:
                header, payload = channel.receive(timeout=None)
            except PeerClosedError as exc:
                if not exc.clean:
                    _say(f"the client's request broke off: {exc}")
                return 0 if exc.clean else 1
            except FrameError as exc:
                _say(f"not a request: {exc}")
                _reply(channel, [_error("protocol", str(exc))])
                return 1
            except WireError as exc:
                _say(str(exc))
                return 1
            op = header.get("op")
            if op == "hello":
                remote, reply = _hello(header, root)
                if not _reply(channel, [reply]):
                    return 1
                continue
            if remote is None:
                replies = [_error("protocol", f"{op!r} before the handshake")]
            else:
                replies = _answer(remote, op, header, payload)
            if not _reply(channel, replies):
                return 1
    finally:
        if remote is not None:
            remote.close()


def _hello(header: Header, root: str) -> tuple[Remote | None, Reply]:
    """The handshake: the same protocol version, then the remote opened (its folder is
    made by the first write, never here)."""
    version = header.get("version")
    if version != PROTOCOL_VERSION:
        message = (
            f"the client speaks remote protocol version {version!r}; this tillage speaks "
            f"{PROTOCOL_VERSION}"
        )
        return None, _error("version", message, version=PROTOCOL_VERSION)
    try:
        from tillage.remote.directory import DirectoryRemote

        # Nothing is made here: the folder comes with the first write (a new remote's key
        # check, by `remote add` or a first push), so a clone, pull or probe of a mistyped
        # path finds no remote there and leaves the far side as it was.
        remote: Remote = DirectoryRemote(root, url=root)
    except Exception as exc:  # a folder it cannot make or open: told to the client
        return None, _failure(exc, f"cannot open {root} on the far side")
    return remote, ({"ok": True, "version": PROTOCOL_VERSION, "max_payload": MAX_PAYLOAD}, b"")


def _answer(remote: Remote, op: object, header: Header, payload: bytes) -> list[Reply]:
    """One request's replies (several for a long list); a failure is an error reply."""
    try:
        replies = list(_dispatch(remote, op, header, payload))
    except Exception as exc:
        return [_failure(exc, f"{op} failed on the far side")]
    for _, data in replies:
        if len(data) > MAX_PAYLOAD:  # stored by another transport: too big for one frame
            message = f"{op}: {len(data)} bytes are over the SSH remote's {MAX_PAYLOAD}"
            return [_error("too_large", message)]
    return replies


def _dispatch(remote: Remote, op: object, header: Header, payload: bytes) -> Iterator[Reply]:
    if op == "exists":
        present = remote.exists(split_names(payload))
        yield {"ok": True}, join_names(sorted(present))
    elif op == "put":
        remote.put(_text(header, "name"), payload)
        yield {"ok": True}, b""
    elif op == "get":
        yield {"ok": True}, remote.get(_text(header, "name"))
    elif op == "get_range":
        offset, length = _int(header, "offset"), _int(header, "length")
        yield {"ok": True}, remote.get_range(_text(header, "name"), offset, length)
    elif op == "list":
        yield from _list_frames(remote.list(_text(header, "prefix")))
    elif op == "delete":
        remote.delete(_text(header, "name"))
        yield {"ok": True}, b""
    elif op == "read_versioned":
        found = remote.read_versioned(_text(header, "name"))
        if found is None:
            yield {"ok": True, "found": False}, b""
        else:
            yield {"ok": True, "found": True, "token": found.token}, found.data
    elif op == "write_if":
        expect = header.get("expect")
        if expect is not None and not isinstance(expect, str):
            raise FrameError(f"write_if: expect is {expect!r}, not a token")
        written = remote.write_if(_text(header, "name"), payload, expect)
        yield {"ok": True, "written": written}, b""
    else:
        raise FrameError(f"unknown operation {op!r}")


def _list_frames(names: list[str]) -> Iterator[Reply]:
    """A list answer in frames of about LIST_FRAME bytes; all but the last say `more`."""
    batch: list[str] = []
    size = 0
    for name in names:
        if batch and size + len(name) + 1 > LIST_FRAME:
            yield {"ok": True, "more": True}, join_names(batch)
            batch, size = [], 0
        batch.append(name)
        size += len(name) + 1
    yield {"ok": True, "more": False}, join_names(batch)


def _text(header: Header, field: str) -> str:
    value = header.get(field)
    if not isinstance(value, str):
        raise FrameError(f"{header.get('op')}: {field} is {value!r}, not a string")
    return value


def _int(header: Header, field: str) -> int:
    value = header.get(field)
    if type(value) is not int:
        raise FrameError(f"{header.get('op')}: {field} is {value!r}, not an integer")
    return value


def _failure(exc: Exception, doing: str) -> Reply:
    """An exception as an error reply the client turns back into the same kind of error."""
    from tillage.remote.errors import InvalidRemoteNameError, RemoteMissingError

    if isinstance(exc, RemoteMissingError):
        return _error("missing", str(exc), name=exc.name)
    if isinstance(exc, InvalidRemoteNameError):
        return _error("invalid_name", str(exc))
    if isinstance(exc, FrameError):
        return _error("protocol", str(exc))
    if isinstance(exc, TillageError):
        body = exc.envelope()
        return {"error": {"kind": "tillage", **body, "message": f"{doing}: {exc.message}"}}, b""
    if not isinstance(exc, OSError):
        _say(f"{doing}: {type(exc).__name__}: {exc}")  # a bug: its name helps the report
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return _error("failed", f"{doing}: {reason}")


def _error(kind: str, message: str, **extra: object) -> Reply:
    return {"error": {"kind": kind, "message": message, **extra}}, b""


def _reply(channel: Channel, replies: list[Reply]) -> bool:
    """Sends the replies; False when the client is gone."""
    try:
        for header, payload in replies:
            channel.send(header, payload, timeout=REPLY_TIMEOUT)
    except WireError as exc:
        _say(f"the client stopped reading: {exc}")
        return False
    return True


def _say(message: str) -> None:
    try:
        sys.stderr.write(f"till remote-serve: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
