"""What a command reads from its caller: on stdin, a harness's document (an agent hook's JSON),
read so that a hook never hangs, and a value (`till coord write KEY < file`), read whole as its
bytes; at the terminal, a secret typed without echo (the recovery key: ask_secret).

A harness may pipe a document and close stdin, pipe nothing and close it, or leave it open and
write nothing: the read takes at most STDIN_DEADLINE seconds in all and STDIN_CAP bytes, and a
document that looks whole (ends with `}`) followed by a short pause ends it early. Only `os` at
import time: the console script's socket door reads the same way before it sends the bytes on.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

STDIN_CAP = 1 << 20  # bytes
STDIN_DEADLINE = 1.0  # seconds, in all
STDIN_SETTLE = 0.05  # seconds of quiet after a document that looks whole


def read_payload(stdin: bytes | BinaryIO | None) -> str:
    """The document as text (UTF-8, bad bytes replaced): from bytes already read (a served
    call), or from a stream, with the deadline and the cap; "" when there is none."""
    if stdin is None:
        return ""
    if isinstance(stdin, bytes):
        data = stdin[:STDIN_CAP]
    else:
        try:
            fd = stdin.fileno()
        except (OSError, ValueError):
            return ""
        data = read_fd(fd)
    return data.decode("utf-8", "replace")


def read_fd(fd: int) -> bytes:
    """Reads `fd` until end of file, the cap, the deadline, or a pause after a whole-looking
    document, whichever comes first."""
    import select
    import time

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    deadline = time.monotonic() + STDIN_DEADLINE
    chunks: list[bytes] = []
    size = 0
    while size < STDIN_CAP:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        whole = bool(chunks) and chunks[-1].rstrip().endswith(b"}")
        wait = min(left, STDIN_SETTLE) if whole else left
        try:
            if not poller.poll(wait * 1000):
                if whole:
                    break
                continue
            chunk = os.read(fd, min(65536, STDIN_CAP - size))
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break  # end of file: the harness closed it
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_value(stdin: bytes | BinaryIO | None, cap: int) -> bytes | None:
    """A value on stdin, exactly as its bytes, read to its end or to `cap` bytes (the verb
    refuses one that reaches it); None when there is none (no stdin, or an empty one)."""
    if stdin is None:
        return None
    if isinstance(stdin, bytes):
        data = stdin[:cap]
    else:
        try:
            fd = stdin.fileno()
        except (OSError, ValueError):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < cap:
            try:
                chunk = os.read(fd, min(1 << 16, cap - size))
            except InterruptedError:
                continue
            except OSError:  # no readable stdin (closed, a directory): nothing on it
                break
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    return data or None


def ask_secret(prompt: str) -> str | None:
    """What the person types at this process's terminal (/dev/tty), not echoed; None at
    end of input. Only offered when stdin and stderr are terminals (hosts/cli/main.py)."""
    import getpass

    try:
        return getpass.getpass(prompt)
    except EOFError:
        return None
