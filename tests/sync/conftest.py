"""Fixtures of the sync tests: remotes of every transport as real `till` processes reach them,
and machines (each its own store) that share them.

The session servers (a real sshd, moto) are tests/remote/ssh_server.py's and s3_server.py's,
registered once by the top conftest, so a whole run starts one of each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import obstore
import pytest

from tests.conftest import Till
from tests.remote.s3_server import MotoServer
from tests.remote.ssh_server import SshServer
from tillage.platform.names import random_hex
from tillage.remote.base import Remote

TRANSPORTS = ("directory", "ssh", "s3")


class Machine(Till):
    """`till` run against a store of its own (one machine), with the environment its
    transport needs (ssh's TILLAGE_SSH, the AWS variables) in every process it starts, the
    fault harness's crash helpers included."""

    def __init__(self, home: Path, user_home: Path, cwd: Path, extra: dict[str, str]) -> None:
        super().__init__(home, user_home, cwd)
        self.extra = dict(extra)

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.extra}


@dataclass
class Site:
    """Where a remote lives: its URL and the environment a `till` process needs to reach it,
    and, for the tests' inspection, every object its storage holds (temporaries and lock files
    too), read below the transport."""

    kind: str
    url: str
    env: dict[str, str]
    scan: Callable[[], dict[str, bytes]]
    cwd: Path
    opened: list[Remote] = field(default_factory=list)

    def stored(self) -> dict[str, bytes]:
        """Every stored object's raw key and bytes."""
        return self.scan()

    def open(self) -> Remote:
        """The remote through its own transport, for the tests to damage it (closed at the
        end of the test)."""
        from tillage.remote.url import open_remote

        remote = open_remote(self.url, dict(self.env), str(self.cwd))
        self.opened.append(remote)
        return remote

    def packs(self) -> list[str]:
        """The names of the remote's packs (not its config, key files, indexes or refs)."""
        return self.open().list("packs/")


def files_below(*roots: Path) -> dict[str, bytes]:
    """Every regular file below the roots, by path."""
    out: dict[str, bytes] = {}
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    out[path] = Path(path).read_bytes()
    return out


@pytest.fixture(params=TRANSPORTS)
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A fresh, empty remote of each transport in turn."""
    kind: str = request.param
    yield from _site(kind, request, tmp_path)


@pytest.fixture
def dir_site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A fresh directory remote (where the transport does not matter)."""
    yield from _site("directory", request, tmp_path)


@pytest.fixture
def s3_site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A fresh S3 remote (a bucket of moto's)."""
    yield from _site("s3", request, tmp_path)


@pytest.fixture
def ssh_site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A fresh remote behind the real sshd."""
    yield from _site("ssh", request, tmp_path)


def _site(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    if kind == "directory":
        root = tmp_path / "remote"
        made = Site(kind, str(root), {}, lambda: files_below(root), tmp_path)
    elif kind == "ssh":
        server: SshServer = request.getfixturevalue("ssh_server")
        root = tmp_path / "ssh-remote"
        # The far side's own TILLAGE_HOME is scanned too: nothing may land there in the clear.
        far_home = server.folder / "far-home"
        made = Site(
            kind, server.url(root), server.env(), lambda: files_below(root, far_home), tmp_path
        )
    else:
        moto: MotoServer = request.getfixturevalue("s3_server")
        bucket = f"tillage-sync-{random_hex(6)}"
        moto.create_bucket(bucket)

        def scan() -> dict[str, bytes]:
            store = moto.raw_store(bucket)
            keys = [meta["path"] for page in obstore.list(store, None) for meta in page]
            return {key: bytes(obstore.get(store, key).bytes()) for key in keys}

        made = Site(kind, f"s3://{bucket}/sync", moto.env(), scan, tmp_path)

        def cleanup() -> None:
            moto.remove_bucket(bucket)

    try:
        yield made
    finally:
        for remote in made.opened:
            remote.close()
        cleanup()


@pytest.fixture
def machines(
    tmp_path: Path, user_home: Path, folder: Path
) -> Callable[[Site], tuple[Machine, Machine]]:
    """Two machines for a site: A works in `folder`, B's clones go below tmp_path."""

    def make(site: Site) -> tuple[Machine, Machine]:
        a = Machine(tmp_path / "store-a", user_home, folder, site.env)
        b = Machine(tmp_path / "store-b", user_home, tmp_path, site.env)
        return a, b

    return make


from tests.remote.s3_proxy import s3_proxy  # noqa: E402, F401  (the counting S3 proxy)
