"""A proxy in front of the session's moto, in this test process: it counts the requests that
pass (by method and by whether they carry a Range) and, when asked, drops the conditional-write
headers (If-None-Match, If-Match) on the way, standing in for an S3 look-alike that ignores
them. moto does not check signatures, so a dropped signed header still passes."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.remote.s3_server import MotoServer

__all__ = ["S3Proxy", "s3_proxy"]

_DROPPED = frozenset({"if-none-match", "if-match"})
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


class S3Proxy:
    """The running proxy: `endpoint` to point TILLAGE_S3_ENDPOINT at, `counts` of what
    passed, and `ignore_conditions` to behave like a store that ignores conditional writes."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.counts: Counter[str] = Counter()
        self.ignore_conditions = False
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in _HOP
                    and not (proxy.ignore_conditions and k.lower() in _DROPPED)
                }
                if body is not None and "content-type" not in {k.lower() for k in headers}:
                    # else urllib says form data, and moto stores an empty object
                    headers["Content-Type"] = "application/octet-stream"
                with proxy._lock:
                    proxy.counts[self.command] += 1
                    if "range" in {k.lower() for k in self.headers}:
                        proxy.counts["ranged"] += 1
                request = urllib.request.Request(
                    proxy.upstream + self.path, data=body, headers=headers, method=self.command
                )
                try:
                    reply = urllib.request.urlopen(request, timeout=60)
                    status, reply_headers, data = reply.status, reply.headers, reply.read()
                except urllib.error.HTTPError as exc:
                    status, reply_headers, data = exc.code, exc.headers, exc.read()
                self.send_response(status)
                for k, v in reply_headers.items():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def s3_proxy(s3_server: MotoServer) -> Iterator[S3Proxy]:
    """A fresh counting proxy in front of the session's moto (conditions passed through)."""
    proxy = S3Proxy(s3_server.endpoint)
    try:
        yield proxy
    finally:
        proxy.stop()
