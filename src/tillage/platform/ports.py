"""Whether a TCP port can be listened on here: the one test that tells is binding it."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def can_listen(port: int, host: str = LOOPBACK) -> bool:
    """True when a TCP socket can bind `host:port` now. SO_REUSEADDR, as servers set it: a
    port a server listens on (on this address or on every one) is taken, one whose last
    connection lingers in TIME_WAIT is not; a port this process may not bind (below 1024
    without the right) counts as taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
