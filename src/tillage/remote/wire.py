"""The SSH remote's framed protocol: one request, one reply, over a pair of pipes.

A frame is a 4-byte big-endian length, that many bytes of a JSON object (the header), then
`header["len"]` bytes of payload (absent: none). Requests carry `op`; replies carry
`{"ok": true, ...}` or `{"error": {...}}`. The first exchange is the handshake
(`{"op": "hello", "version": 1}`), so two tillage versions that speak differently are told
apart before anything else is asked. Lists of names travel in the payload, one per line
(a remote name never holds a newline: `names.check_name`), so the header stays small.

Every wait has a deadline: a peer that dies closes its pipe (PeerClosedError), a peer that
goes silent for longer than the idle timeout is PeerTimeoutError, and bytes that are not a
frame (a login banner, another program) are FrameError, never a hang or a 4 GiB allocation:
a header over MAX_HEADER or a payload over MAX_PAYLOAD is refused before it is read.
"""

from __future__ import annotations

import json
import os
import select
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


# 2: `get_range` (a part of a name: one blob of a pack).
PROTOCOL_VERSION = 2
MAX_HEADER = 64 * 1024
MAX_PAYLOAD = 64 * 1024 * 1024
# A frame header: JSON values only (str, int, bool, None, lists and objects of them).
Header = dict[str, object]

_PREFIX = struct.Struct(">I")
_READ_SIZE = 256 * 1024
_SMALL = 64 * 1024  # a payload up to this size is sent in the same write as its header
_ECHO = 60
# How long a frame may stall once its first byte has arrived, when the reader would otherwise
# wait for ever (a server between requests): a client that died mid-frame frees the server.
IDLE_IN_FRAME = 300.0


class WireError(Exception):
    """The stream between the two sides failed; the transport says which remote and why."""


class PeerClosedError(WireError):
    """The other side closed its end: at a frame boundary (`clean`) or in the middle of one."""

    def __init__(self, message: str, *, clean: bool) -> None:
        super().__init__(message)
        self.clean = clean


class PeerTimeoutError(WireError):
    """The other side sent (or took) nothing for longer than the idle timeout."""


class FrameError(WireError):
    """The bytes received are not a frame of this protocol (junk, an oversize length, a
    header that is not a JSON object)."""


def _shown(data: bytes) -> str:
    """The first bytes of something that is not a frame, safe to put in a message."""
    text = data[:_ECHO].decode("utf-8", errors="replace")
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return repr(text) + ("..." if len(data) > _ECHO else "")


def encode_header(header: Mapping[str, object]) -> bytes:
    """The length prefix and JSON text of a header; ValueError when it is over MAX_HEADER
    (a bug of the sender: headers carry a few fields, never data)."""
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(text) > MAX_HEADER:
        raise ValueError(f"a frame header of {len(text)} bytes is over {MAX_HEADER}")
    return _PREFIX.pack(len(text)) + text


def payload_length(header: Mapping[str, object]) -> int:
    """The payload size a header announces (0 without `len`); FrameError when it is not a
    non-negative integer up to MAX_PAYLOAD."""
    size = header.get("len", 0)
    if type(size) is not int or size < 0:
        raise FrameError(f"a frame announced a payload length of {size!r}")
    if size > MAX_PAYLOAD:
        raise FrameError(f"a frame announced a payload of {size} bytes, over {MAX_PAYLOAD}")
    return size


def join_names(names: list[str] | tuple[str, ...]) -> bytes:
    """Names as a payload, one a line."""
    return "\n".join(names).encode("utf-8")


def split_names(payload: bytes) -> list[str]:
    """The names of a payload written by `join_names`; FrameError when it is not UTF-8."""
    if not payload:
        return []
    try:
        return payload.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise FrameError("a list of names is not UTF-8") from exc


class Channel:
    """One side of the protocol over two file descriptors (a pipe pair, a socket twice).

    Both descriptors are switched to non-blocking, so a write to a peer that stopped reading
    is bounded by the idle timeout too. Not thread-safe: the transport holds a lock around
    each request and its reply."""

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        os.set_blocking(in_fd, False)
        os.set_blocking(out_fd, False)
        self._buffer = bytearray()
        self._in_poll = select.poll()
        self._in_poll.register(in_fd, select.POLLIN)
        self._out_poll = select.poll()
        self._out_poll.register(out_fd, select.POLLOUT)

    def send(self, header: Mapping[str, object], payload: bytes = b"", *, timeout: float) -> None:
        """Writes one frame (`len` is set from the payload); PeerClosedError when the reader
        is gone, PeerTimeoutError when it read nothing for `timeout` seconds."""
        if len(payload) > MAX_PAYLOAD:
            raise ValueError(f"a payload of {len(payload)} bytes is over {MAX_PAYLOAD}")
        head = encode_header({**header, "len": len(payload)} if payload else header)
        if len(payload) <= _SMALL:
            self._write(memoryview(head + payload), timeout)
        else:
            self._write(memoryview(head), timeout)
            self._write(memoryview(payload), timeout)

    def receive(self, *, timeout: float | None) -> tuple[Header, bytes]:
        """Reads one frame: its header and payload. `timeout` bounds each silence (None: wait
        for the first byte as long as it takes, as a server between requests does; the rest
        of the frame is then bounded by IDLE_IN_FRAME)."""
        prefix = self._take(_PREFIX.size, timeout, boundary=True)
        inside = timeout if timeout is not None else IDLE_IN_FRAME
        (size,) = _PREFIX.unpack(prefix)
        if size > MAX_HEADER:
            seen = bytes(prefix) + bytes(self._buffer[:_ECHO])
            raise FrameError(f"the far side sent something that is not a frame: {_shown(seen)}")
        text = self._take(size, inside, boundary=False)
        try:
            header = json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            seen = bytes(prefix) + bytes(text)
            raise FrameError(
                f"the far side sent something that is not a frame: {_shown(seen)}"
            ) from exc
        if not isinstance(header, dict):
            raise FrameError(f"a frame header is not a JSON object: {_shown(bytes(text))}")
        payload = self._take(payload_length(header), inside, boundary=False)
        return header, bytes(payload)

    def _take(self, size: int, timeout: float | None, *, boundary: bool) -> bytearray:
        """Exactly `size` bytes: from what was read ahead, then from the descriptor (straight
        into the result when it is large, so a 64 MiB payload is not copied chunk by chunk)."""
        out = bytearray(size)
        view = memoryview(out)
        have = min(size, len(self._buffer))
        view[:have] = self._buffer[:have]
        del self._buffer[:have]
        while have < size:
            self._wait(self._in_poll, timeout, "answer")
            try:
                if size - have >= _READ_SIZE:
                    got = os.readv(self.in_fd, [view[have:]])
                    chunk = b""
                else:
                    chunk = os.read(self.in_fd, _READ_SIZE)
                    got = len(chunk)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise PeerClosedError(f"reading failed: {exc}", clean=False) from exc
            if got == 0:
                clean = boundary and have == 0
                where = "between frames" if clean else f"after {have} of {size} bytes"
                raise PeerClosedError(f"the stream ended {where}", clean=clean)
            if chunk:
                use = min(got, size - have)
                view[have : have + use] = chunk[:use]
                self._buffer += chunk[use:]
                got = use
            have += got
        return out

    def _write(self, data: memoryview, timeout: float) -> None:
        done = 0
        while done < len(data):
            try:
                done += os.write(self.out_fd, data[done:])
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise PeerClosedError("the far side stopped reading", clean=False) from exc
            self._wait(self._out_poll, timeout, "reading")

    def _wait(self, poller: select.poll, timeout: float | None, what: str) -> None:
        ms = None if timeout is None else max(1, int(timeout * 1000))
        if not poller.poll(ms):
            raise PeerTimeoutError(f"no {what} from the far side for {timeout:g} s")
