"""Shared fixtures: every test gets its own TILLAGE_HOME and HOME; `till` runs in this process
(see Till). Markers: `unit` and `process` by folder (FOLDER_MARKERS) or in a test module,
`slow`; Hypothesis's profile from the environment (tests/hypothesis_profiles.py)."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.hypothesis_profiles import load_profile


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


load_profile(os.environ)  # before any test module is imported: settings are fixed then


def pytest_configure(config: pytest.Config) -> None:
    """One seed for the kill campaigns per run, chosen before any test module is imported and
    handed to the xdist workers through the environment, so they all collect the same tests:
    0 under CI (the same answer every time), else a random one (shown in the header).

    A run started in the background of a shell without job control (`cmd &` in a script,
    nohup) inherits SIGINT ignored, and so would every process a test starts, where Python
    then raises no KeyboardInterrupt: the tests of Ctrl-C take the default back."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not os.environ.get("TILLAGE_KILL_SEED"):
        seed = 0 if os.environ.get("CI") else random.randrange(10**4)
        os.environ["TILLAGE_KILL_SEED"] = str(seed)


# Markers by folder (as pip applies its own): `unit` for what runs no command line, `process`
# for the folders whose tests drive real processes throughout (kill campaigns, daemons). A test
# elsewhere that must be a process is marked in its module. `-m "not slow and not process"`
# is the inner loop.
FOLDER_MARKERS = {
    "unit": "unit",
    "property": "unit",
    "crypto": "unit",
    "faults": "process",
    "watch": "process",
}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(item.path).relative_to(TESTS).parts[0]
        marker = FOLDER_MARKERS.get(folder)
        if marker is not None:
            item.add_marker(getattr(pytest.mark, marker))


def pytest_report_header(config: pytest.Config) -> str:
    return f"kill campaign seed: TILLAGE_KILL_SEED={os.environ.get('TILLAGE_KILL_SEED')}"


# Command lines that must be a process of their own: they serve on stdio until it closes, or
# become the watcher; a served call refuses them, as the watcher's socket would.
_SERVES = frozenset({"mcp", "remote-serve", "ui"})


def _must_be_a_process(args: tuple[str, ...], env: dict[str, str]) -> bool:
    """True for a command line no in-process call can answer as its process would: a door
    that serves (`mcp` without `--list`, `remote-serve`), `--foreground`, or another time
    zone than ours (local times are process-wide)."""
    words = set(args)
    if "--foreground" in words or (words & _SERVES and "--list" not in words):
        return True
    return env.get("TZ") != os.environ.get("TZ")


class Till:
    """Runs `till` against one store, from one folder.

    In this process by default: the command line's own `run(argv, IO)` with the folder, the
    environment and stdin of the call passed in and stdout/stderr captured, exactly as the
    watcher serves a thin client's call (hosts/cli/main.run_served). Half a second of
    interpreter start-up saved per call is most of the suite's time. `process=True` (on the
    instance or per call) runs the installed command as a real process instead, and so does a
    command line that needs one (_must_be_a_process). tests/cli/test_every_verb_as_a_process.py
    runs every verb as a process once.
    """

    def __init__(self, home: Path, user_home: Path, cwd: Path, *, process: bool = False) -> None:
        self.home = home
        self.user_home = user_home
        self.cwd = cwd
        self.process = process

    def env(self) -> dict[str, str]:
        # PORT is the base of universes' ports: a test that wants one sets it.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_") and k != "PORT"}
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
        process: bool | None = None,
    ) -> Run:
        full_env = {**self.env(), **(env or {})}
        where = cwd or self.cwd
        as_process = self.process if process is None else process
        if as_process or _must_be_a_process(args, full_env):
            return _as_process(args, where, full_env, stdin, timeout)
        return _in_process(args, where, full_env, stdin)

    def spawn(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """Starts `till ARGS...` as a process of its own that runs until stopped (a door that
        serves, a follower), with stdout and stderr piped as text and no stdin."""
        return subprocess.Popen(
            [sys.executable, "-m", "tillage", *args],
            cwd=cwd or self.cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def json(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
        """Runs with --json, asserts success, and returns the parsed document."""
        run = self("--json", *args, cwd=cwd, env=env)
        assert run.code == 0, (run.code, run.stdout, run.stderr)
        return run.doc


def _as_process(
    args: tuple[str, ...], cwd: Path, env: dict[str, str], stdin: str | None, timeout: float
) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", *args],
        cwd=cwd,
        env=env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _in_process(args: tuple[str, ...], cwd: Path, env: dict[str, str], stdin: str | None) -> Run:
    from tillage.hosts.cli.main import IO, run
    from tillage.store.store import closing_stores_opened_here

    out, err = io.BytesIO(), io.BytesIO()
    call = IO(
        cwd=str(cwd) if cwd.is_dir() else None,
        env=env,
        stdin=(stdin or "").encode(),
        stdout=out,
        stderr=err,
    )
    with closing_stores_opened_here():  # as the watcher does after a served call
        code = run(list(args), call)
    decode = lambda raw: raw.decode("utf-8", "surrogateescape")  # noqa: E731
    return Run(code, decode(out.getvalue()), decode(err.getvalue()))


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
# run starts at most one of each (per xdist worker), and only when a test asks for it; their
# modules import obstore and the remotes only inside the fixtures. (A star import: pytest
# refuses `pytest_plugins` below the top conftest, and a conftest lower down would register
# session fixtures of its own.)
from tests.remote.s3_server import *  # noqa: E402, F403
from tests.remote.ssh_server import *  # noqa: E402, F403
