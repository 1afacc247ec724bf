"""A local S3-compatible server for the S3 remote's tests: moto on 127.0.0.1 (LIBRARIES.md §10).

`s3_server` (one per session) runs moto's own `moto_server` entry point as our child, stopped by
its PID at the end, with one change: requests that write (PUT, POST, DELETE) are handled one at
a time. moto checks `If-None-Match`/`If-Match` and then stores the object as two steps of a
threaded Flask server, so racing conditional writes can all pass the check: against plain
`moto_server`, 4 writers with 8 MiB bodies had 2 or 3 winners in 2 of 10 create rounds and 4 of
10 replace rounds (16 MiB: up to all 4). S3 itself decides them atomically, and the race tests
need a server that does. Reads stay concurrent.

`s3_remote` is a fresh S3Remote per test (its own bucket, under a key prefix), and
`s3_remote_env` is the environment that reopens its URL: test credentials, the endpoint in
TILLAGE_S3_ENDPOINT and TILLAGE_S3_ALLOW_HTTP=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import free_port
from tillage.platform.names import random_hex
from tillage.remote.base import Remote

# Every test run imports this module (the top conftest registers its fixtures), a pure property
# test's too: obstore and the S3 remote are imported by the fixtures that use them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = ["s3_remote", "s3_remote_env", "s3_server"]

START_TIMEOUT = 30.0  # moto imports Flask and every backend: seconds on a loaded machine
STOP_TIMEOUT = 10.0
TEST_KEY_ID = "tillage-test-key-id"
TEST_SECRET = "tillage-test-secret-not-a-real-one"

# moto_server's main() with its WSGI application's class swapped for one that serializes
# writes; everything else (arguments, request handler, threads for reads) is moto's own.
SERIAL_MOTO = """
import sys, threading
from moto import server

class SerialWrites(server.DomainDispatcherApplication):
    writes = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
            with self.writes:
                return super().__call__(environ, start_response)
        return super().__call__(environ, start_response)

server.DomainDispatcherApplication = SerialWrites
server.main(sys.argv[1:])
"""


@dataclass
class MotoServer:
    """A running moto server on 127.0.0.1 (our child process) and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment an S3Remote needs to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": TEST_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": TEST_SECRET,
            "AWS_REGION": "us-east-1",
            "TILLAGE_S3_ENDPOINT": self.endpoint,
            "TILLAGE_S3_ALLOW_HTTP": "1",
            **extra,
        }

    def raw_store(self, bucket: str) -> S3Store:
        """A plain obstore store on `bucket`, for the tests' own setup and inspection."""
        from obstore.store import S3Store

        return S3Store(
            bucket,
            endpoint=self.endpoint,
            region="us-east-1",
            virtual_hosted_style_request=False,
            access_key_id=TEST_KEY_ID,
            secret_access_key=TEST_SECRET,
            client_options={"allow_http": True},
        )

    def create_bucket(self, bucket: str) -> None:
        """Creates `bucket` (moto takes an unsigned CreateBucket)."""
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 200, reply.status

    def remove_bucket(self, bucket: str) -> None:
        """Deletes `bucket` and everything in it, so a session's tests do not pile up in
        moto's memory (a 64 MiB object each)."""
        import obstore

        store = self.raw_store(bucket)
        keys = [meta["path"] for page in obstore.list(store, None) for meta in page]
        for start in range(0, len(keys), 1000):
            obstore.delete(store, keys[start : start + 1000])
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="DELETE")
        try:
            with urllib.request.urlopen(request, timeout=30):
                pass
        except urllib.error.HTTPError:
            pass

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stops the server by its PID (SIGTERM, then SIGKILL after STOP_TIMEOUT)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)


def start_moto(folder: Path, *, env: Mapping[str, str] | None = None) -> MotoServer:
    """Starts a moto server (writes serialized, see the module's docstring) on a free port
    and waits until it answers, at most START_TIMEOUT; a port taken in between is retried."""
    child_env = {**os.environ, **(env or {})}
    failures: list[str] = []
    for attempt in range(3):
        port = free_port()
        log_path = folder / f"moto-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", SERIAL_MOTO, "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env,
            )
        server = MotoServer(process, port, log_path)
        if _wait_until_ready(server):
            return server
        server.stop()
        failures.append(f"attempt {attempt + 1} on port {port}:\n{server.log()}")
    pytest.fail("moto did not start:\n" + "\n".join(failures))


def _wait_until_ready(server: MotoServer) -> bool:
    """Polls moto's own API (which needs no credentials and counts no action) until it
    answers; False when the process ended or START_TIMEOUT passed."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{server.endpoint}/moto-api/data.json", timeout=2):
                return True
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto server for the whole run."""
    server = start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture
def s3_remote_env(s3_server: MotoServer) -> Mapping[str, str]:
    """What `open_remote` needs to reopen `s3_remote` from its URL."""
    return s3_server.env()


@pytest.fixture
def s3_remote(s3_server: MotoServer, s3_remote_env: Mapping[str, str]) -> Iterator[Remote]:
    """A fresh S3Remote: a bucket of its own, names under the key prefix `sync/remote`."""
    bucket = f"tillage-{random_hex(8)}"
    s3_server.create_bucket(bucket)
    from tillage.remote.s3 import S3Remote

    remote = S3Remote.from_url(f"s3://{bucket}/sync/remote", s3_remote_env)
    yield remote
    remote.close()
    s3_server.remove_bucket(bucket)
