"""The remotes under test: one `remote` fixture parametrized over every transport.

Each kind K provides two fixtures: `K_remote` (a fresh, empty remote for one test, with a `url`
that `open_remote(url, K_remote_env, cwd)` reopens) and `K_remote_env` (the environment that
reopening needs: ssh's TILLAGE_SSH and TILLAGE_REMOTE_TILL, the AWS variables and endpoint for
S3). memory and directory live here; ssh in tests/remote/ssh_server.py and s3 in
tests/remote/s3_server.py, whose session-scoped servers start once per run.

Those two modules are star-imported rather than named in `pytest_plugins`: pytest refuses
`pytest_plugins` in a conftest below the top one when the whole suite runs. A star import
brings every public fixture they define (their session servers too); so their fixture names
must not start with `_`, and the two modules must not share a fixture name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tillage.platform.names import random_hex
from tillage.remote.base import Remote
from tillage.remote.directory import DirectoryRemote
from tillage.remote.memory import MemoryRemote, discard_space

REMOTE_KINDS = ("memory", "directory", "ssh", "s3")


@pytest.fixture(params=REMOTE_KINDS)
def remote_kind(request: pytest.FixtureRequest) -> str:
    """Which transport this test runs against (the parameter of `remote`)."""
    kind = request.param
    assert isinstance(kind, str)
    return kind


@pytest.fixture
def remote(remote_kind: str, request: pytest.FixtureRequest) -> Remote:
    """A fresh, empty remote of each kind in turn."""
    value: Remote = request.getfixturevalue(f"{remote_kind}_remote")
    assert isinstance(value.url, str)
    return value


@pytest.fixture
def remote_env(remote_kind: str, request: pytest.FixtureRequest) -> Mapping[str, str]:
    """The environment `open_remote` needs to reopen `remote` from its URL."""
    env = request.getfixturevalue(f"{remote_kind}_remote_env")
    return dict(env)


@pytest.fixture
def memory_remote() -> Iterator[Remote]:
    name = f"test-{random_hex(8)}"
    remote = MemoryRemote(name)
    yield remote
    remote.close()
    discard_space(name)


@pytest.fixture
def memory_remote_env() -> Mapping[str, str]:
    return {}


@pytest.fixture
def directory_remote(tmp_path: Path) -> Iterator[Remote]:
    remote = DirectoryRemote(tmp_path / "remote")
    yield remote
    remote.close()


@pytest.fixture
def directory_remote_env() -> Mapping[str, str]:
    return {}
