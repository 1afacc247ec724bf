"""Placeholder until the ssh helper lands: its sshd fixture replaces this file."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from tillage.remote.base import Remote


@pytest.fixture
def ssh_remote_env() -> Mapping[str, str]:
    pytest.skip("not built yet: the ssh remote's test server")


@pytest.fixture
def ssh_remote() -> Iterator[Remote]:
    pytest.skip("not built yet: the ssh remote's test server")
