"""The tools under test (tillage, borg, restic, git), each driven through the same steps.

A runner turns each benchmark step into the tool's own commands; `Tool.exec`
runs and records them so the harness can time a step as the sum of its
processes. Adding a tool means adding one subclass and one TOOL_CLASSES entry.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from measure import BenchError, Proc, ToolMissingError, run_measured, tail

HEX64 = re.compile(r"[0-9a-f]{64}")
TOOLS = ("tillage", "tillage+watch", "borg", "restic", "git")  # table column order
TILLAGE_VARIANTS = ("tillage", "tillage+watch")


class Tool:
    """One backup tool driven through the benchmark steps.

    Subclasses turn each step into commands; `exec` runs and records them, so
    the harness can time a step as the sum of its processes.
    """

    name = ""
    ok_codes: tuple[int, ...] = (0,)
    excluded: frozenset[str] = frozenset()  # top-level names not sealed / not compared

    def __init__(self, run_dir: Path, workspace: Path) -> None:
        self.run_dir = run_dir
        self.ws = workspace
        self.store = run_dir / "store"
        self.aux = run_dir / "aux"
        self.procs: list[Proc] = []

    @classmethod
    def check_available(cls) -> None:
        """Raise ToolMissingError when the tool cannot run on this machine."""
        raise NotImplementedError

    @classmethod
    def version(cls) -> str:
        """One line naming the tool's version."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """The environment for every command of this tool."""
        return dict(os.environ)

    def exec(self, argv: list[str]) -> Proc:
        """Run one command in the workspace, record it, fail on a bad exit."""
        proc = run_measured(argv, cwd=self.ws, env=self.env())
        self.procs.append(proc)
        if proc.returncode not in self.ok_codes:
            raise BenchError(
                f"{self.name}: `{shlex.join(proc.argv)}` exited {proc.returncode}\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return proc

    def store_paths(self) -> list[Path]:
        """Everything that counts as the store (its size is reported)."""
        return [self.store]

    def aux_paths(self) -> list[Path]:
        """Caches and state outside the store: reported separately, not compared."""
        return [self.aux]

    def init(self) -> None:
        """Create an empty store (timed separately, then added to the cold seal)."""

    def cold_seal(self) -> None:
        """Seal the first complete snapshot of the folder."""
        raise NotImplementedError

    def delta_seal(self) -> None:
        """Seal the mutated folder: the second snapshot."""
        raise NotImplementedError

    def full_restore(self) -> None:
        """Restore the second snapshot into the emptied folder, in place."""
        raise NotImplementedError

    def path_restore(self, rel: str) -> None:
        """Restore only `rel` (folder-relative) from the second snapshot."""
        raise NotImplementedError

    def finish(self) -> None:
        """Stop anything the tool left running (untimed)."""


class Tillage(Tool):
    """tillage: watch --no-daemon, snap, rewind (whole folder or --paths)."""

    name = "tillage"
    excluded = frozenset({".tillage"})
    command: ClassVar[list[str]] = [sys.executable, "-m", "tillage"]

    def __init__(self, run_dir: Path, workspace: Path) -> None:
        super().__init__(run_dir, workspace)
        self.home = run_dir / "tillage-home"
        self.delta_id = ""

    @classmethod
    def check_available(cls) -> None:
        if shutil.which(cls.command[0]) is None:
            raise ToolMissingError(f"till command not found: {cls.command[0]}")
        if cls.command[1:3] == ["-m", "tillage"]:
            # Ask that interpreter itself: it may not be the one running this harness.
            probe = subprocess.run(
                [cls.command[0], "-c", "import tillage"], capture_output=True, check=False
            )
            if probe.returncode != 0:
                raise ToolMissingError(
                    f"tillage is not importable by {cls.command[0]}; "
                    "install it (pip install -e .) or pass --till CMD"
                )
            # Measure it as an installed package is run: with its bytecode compiled (pip does
            # this at install time; an editable install or PYTHONDONTWRITEBYTECODE does not).
            subprocess.run(
                [
                    cls.command[0],
                    "-c",
                    "import compileall, os, tillage; "
                    "compileall.compile_dir(os.path.dirname(tillage.__file__), quiet=1)",
                ],
                capture_output=True,
                check=False,
                env=_with_bytecode(os.environ),
            )

    @classmethod
    def version(cls) -> str:
        # A throwaway TILLAGE_HOME so that asking for the version never touches the real one.
        with tempfile.TemporaryDirectory(prefix="tillage-bench-version-") as home:
            env = {**os.environ, "TILLAGE_HOME": home}
            probe = run_measured([*cls.command, "--json", "version"], cwd=Path(home), env=env)
        try:
            doc = json.loads(probe.stdout)
            return f"tillage {doc['version']} (format {doc.get('format', '?')})"
        except (json.JSONDecodeError, KeyError, TypeError):
            pass
        try:
            return f"tillage {importlib.metadata.version('tillage')}"
        except importlib.metadata.PackageNotFoundError:
            return "tillage (version unknown)"

    def env(self) -> dict[str, str]:
        return {**_with_bytecode(os.environ), "TILLAGE_HOME": str(self.home)}

    def store_paths(self) -> list[Path]:
        return [self.home, self.ws / ".tillage"]

    def aux_paths(self) -> list[Path]:
        return []

    def till(self, *args: str) -> dict[str, Any]:
        """Run `till --repo WS --json ARGS` and return its one JSON document."""
        proc = self.exec([*self.command, "--repo", str(self.ws), "--json", *args])
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise BenchError(
                f"tillage: `{shlex.join(proc.argv)}` did not print one JSON "
                f"document: {exc}\nstdout: {tail(proc.stdout)}"
            ) from exc
        if not isinstance(doc, dict) or "error" in doc:
            raise BenchError(f"tillage: `{shlex.join(proc.argv)}` answered {doc!r}")
        return doc

    @staticmethod
    def snapshot_id(doc: dict[str, Any], key: str) -> str:
        """The 64-hex snapshot ID under doc[key]['id'], or a clear error."""
        snap = doc.get(key)
        ident = snap.get("id") if isinstance(snap, dict) else None
        if not isinstance(ident, str) or not HEX64.fullmatch(ident):
            raise BenchError(f"tillage: expected {key}.id (64 hex) in {doc!r}")
        return ident

    def cold_seal(self) -> None:
        self.snapshot_id(self.till("watch", "--no-daemon"), "head")

    def delta_seal(self) -> None:
        self.delta_id = self.snapshot_id(self.till("snap"), "snapshot")

    def _rewind(self, *extra: str) -> None:
        doc = self.till("rewind", self.delta_id, *extra, "--yes")
        if doc.get("applied") is not True:
            raise BenchError(f"tillage: rewind did not apply: {doc!r}")

    def full_restore(self) -> None:
        self._rewind()

    def path_restore(self, rel: str) -> None:
        self._rewind("--paths", rel)


class TillageWatched(Tillage):
    """tillage with its watcher daemon running: `till watch` attaches, seals and starts it;
    every later command finds the daemon's socket and is served by it.

    The table's steps run with a debounce far longer than any step, so the watcher never seals
    the mutated folder on its own before `till snap` is timed: the snap does all of that work
    itself, reading only what the watcher saw change. `watch_phase` measures the watcher's own
    behaviour with the default debounce."""

    name = "tillage+watch"
    TABLE_DEBOUNCE_MS = 600_000

    def cold_seal(self) -> None:
        doc = self.till("watch", "--debounce-ms", str(self.TABLE_DEBOUNCE_MS))
        self.snapshot_id(doc, "head")
        if doc.get("watching") is not True:
            raise BenchError(f"tillage: `till watch` did not start the watcher: {doc!r}")

    def daemon_pid(self) -> int:
        """The running watcher's process ID, as `till status` reports it."""
        doc = self.till("status")
        watcher = doc.get("watcher")
        pid = watcher.get("pid") if isinstance(watcher, dict) else None
        if doc.get("watching") is not True or not isinstance(pid, int):
            raise BenchError(f"tillage: no watcher is running: {doc!r}")
        return pid

    def restart_watcher(self, debounce_ms: int | None = None) -> None:
        """Stop the watcher and start it again (untimed), with `debounce_ms` or the default."""
        self.till("watch", "--stop")
        extra = ["--debounce-ms", str(debounce_ms)] if debounce_ms is not None else []
        self.till("watch", *extra)

    def finish(self) -> None:
        with contextlib.suppress(BenchError):
            self.till("watch", "--stop")


class Borg(Tool):
    """borg 1.x, unencrypted repo, zstd level 3, files cache under BORG_BASE_DIR."""

    name = "borg"
    ok_codes = (0, 1)  # 1 = finished with warnings (reported in stderr)

    @classmethod
    def check_available(cls) -> None:
        if shutil.which("borg") is None:
            raise ToolMissingError("borg is not installed (apt-get install borgbackup)")

    @classmethod
    def version(cls) -> str:
        return _first_line(["borg", "--version"])

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "BORG_BASE_DIR": str(self.aux / "borg"),
            "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
            "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes",
        }

    def init(self) -> None:
        self.exec(["borg", "init", "-e", "none", str(self.store)])

    def cold_seal(self) -> None:
        self.exec(["borg", "create", "-C", "zstd,3", f"{self.store}::a1", "."])

    def delta_seal(self) -> None:
        self.exec(["borg", "create", "-C", "zstd,3", f"{self.store}::a2", "."])

    def full_restore(self) -> None:
        self.exec(["borg", "extract", f"{self.store}::a2"])

    def path_restore(self, rel: str) -> None:
        self.exec(["borg", "extract", f"{self.store}::a2", rel])


class Restic(Tool):
    """restic, backing up `.` from inside the folder so paths are folder-relative."""

    name = "restic"

    @classmethod
    def check_available(cls) -> None:
        if shutil.which("restic") is None:
            raise ToolMissingError("restic is not installed (apt-get install restic)")

    @classmethod
    def version(cls) -> str:
        return _first_line(["restic", "version"])

    def env(self) -> dict[str, str]:
        return {**os.environ, "RESTIC_PASSWORD": "bench"}

    def restic(self, *args: str) -> None:
        self.exec(
            [
                "restic",
                "--repo",
                str(self.store),
                "--cache-dir",
                str(self.aux / "restic-cache"),
                "--quiet",
                *args,
            ]
        )

    def init(self) -> None:
        self.restic("init")

    def cold_seal(self) -> None:
        self.restic("backup", ".")

    def delta_seal(self) -> None:
        self.restic("backup", ".")

    def full_restore(self) -> None:
        self.restic("restore", "latest", "--target", str(self.ws))

    def path_restore(self, rel: str) -> None:
        self.restic("restore", "latest", "--target", str(self.ws), "--include", f"/{rel}")


class Git(Tool):
    """git as a backup tool: GIT_DIR outside the folder, add -A -f, commit.

    git never adds a path named `.git`, so the workload's own repository is
    neither sealed nor compared for this tool (see bench/README.md).
    """

    name = "git"
    excluded = frozenset({".git"})
    quiet = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")

    @classmethod
    def check_available(cls) -> None:
        if shutil.which("git") is None:
            raise ToolMissingError("git is not installed")

    @classmethod
    def version(cls) -> str:
        return _first_line(["git", "--version"])

    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "GIT_DIR": str(self.store),
            "GIT_WORK_TREE": str(self.ws),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        }
        env.pop("GIT_INDEX_FILE", None)
        return env

    def git(self, *args: str) -> None:
        self.exec(["git", *self.quiet, *args])

    def init(self) -> None:
        self.git("init", "-q")

    def _commit(self, message: str) -> None:
        self.git("add", "-A", "-f")
        self.git("commit", "-q", "--no-verify", "-m", message)

    def cold_seal(self) -> None:
        self._commit("a1")

    def delta_seal(self) -> None:
        self._commit("a2")

    def full_restore(self) -> None:
        self.git("checkout", "-f", "HEAD", "--", ".")

    def path_restore(self, rel: str) -> None:
        self.git("checkout", "HEAD", "--", rel)


TOOL_CLASSES: dict[str, type[Tool]] = {
    "tillage+watch": TillageWatched,
    "tillage": Tillage,
    "borg": Borg,
    "restic": Restic,
    "git": Git,
}


def _first_line(argv: list[str]) -> str:
    """First line of a version command's output ('unknown' when it fails)."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def _with_bytecode(env: Mapping[str, str]) -> dict[str, str]:
    """The environment without PYTHONDONTWRITEBYTECODE, as a user's shell usually is."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
