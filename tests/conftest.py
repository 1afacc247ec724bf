"""Shared fixtures: every test gets its own TILLAGE_HOME and HOME; `till` runs as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Run:
    """One finished `till` process."""

    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> Any:
        return json.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any]:
        body = self.doc["error"]
        assert isinstance(body, dict)
        return body


class Till:
    """Runs the real `till` command against one store, from one folder."""

    def __init__(self, home: Path, user_home: Path, cwd: Path) -> None:
        self.home = home
        self.user_home = user_home
        self.cwd = cwd

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
        env["TILLAGE_HOME"] = str(self.home)
        env["HOME"] = str(self.user_home)
        return env

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: str | None = None,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> Run:
        proc = subprocess.run(
            [sys.executable, "-m", "tillage", *args],
            cwd=cwd or self.cwd,
            env={**self.env(), **(env or {})},
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def json(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
        """Runs with --json, asserts success, and returns the parsed document."""
        run = self("--json", *args, cwd=cwd, env=env)
        assert run.code == 0, (run.code, run.stdout, run.stderr)
        return run.doc


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def folder(user_home: Path) -> Path:
    ws = user_home / "project"
    ws.mkdir()
    return ws


@pytest.fixture
def till(tmp_path: Path, user_home: Path, folder: Path) -> Iterator[Till]:
    yield Till(tmp_path / "store", user_home, folder)


def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """Mounts a tmpfs of `size` (mount's `size=` syntax) at `mount` for a fixture to yield,
    unmounted afterwards; the test is skipped where that cannot be done (not root, no mount)."""
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "small-fs", "1m")


# The servers of the sync tests (a real sshd, moto on 127.0.0.1), registered here once so a whole
# run starts at most one of each, and only when a test asks for it. (A star import: pytest
# refuses `pytest_plugins` below the top conftest, and a conftest lower down would register
# session fixtures of its own.)
from tests.remote.s3_server import *  # noqa: E402, F403
from tests.remote.ssh_server import *  # noqa: E402, F403
