"""Measuring primitives: whole-process timing with peak RSS, tree sizes, restore checks.

Kept apart from the tool runners so every tool is measured by the same code.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class BenchError(Exception):
    """A step failed or restored wrong bytes: no numbers may be reported for it."""


class ToolMissingError(Exception):
    """The tool is not installed here; the run skips it and says why."""


@dataclass
class Proc:
    """One finished child process: what ran, how long, how much CPU and memory.

    CPU times are kept beside the wall time because they are far less noisy
    on a shared machine and show whether a slow step was computing or waiting.
    """

    argv: list[str]
    returncode: int
    seconds: float
    user_s: float
    sys_s: float
    max_rss_kib: int
    stdout: str
    stderr: str
    out_blocks: int = 0  # ru_oublock: 512-byte blocks the child itself wrote to storage


def run_measured(argv: list[str], cwd: Path, env: dict[str, str]) -> Proc:
    """Run argv to completion; wall time and peak RSS of exactly that child.

    Popen + os.wait4 (instead of subprocess.run) because wait4 hands back the
    child's own rusage; output goes to temp files so a chatty tool cannot
    block on a full pipe while we sit in wait4.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(f"command not found: {argv[0]}") from exc
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen quiet
        out.seek(0)
        err.seek(0)
        return Proc(
            argv=[str(a) for a in argv],
            returncode=proc.returncode,
            seconds=seconds,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            max_rss_kib=usage.ru_maxrss,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            out_blocks=usage.ru_oublock,
        )


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a tool's output, for error messages."""
    return "\n".join(text.strip().splitlines()[-lines:])


def tree_bytes(paths: list[Path]) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of all files under paths (lstat, like du)."""
    apparent = allocated = 0
    for top in paths:
        if not top.exists():
            continue
        for dirpath, _dirs, names in os.walk(top):
            for name in names:
                st = os.lstat(os.path.join(dirpath, name))
                apparent += st.st_size
                allocated += st.st_blocks * 512
    return apparent, allocated


def manifest(root: Path, excluded: frozenset[str]) -> dict[str, str]:
    """Relative path -> fingerprint of every dir, file and symlink under root.

    Files are fingerprinted by sha256 plus the exec bit, symlinks by target;
    top-level names in `excluded` (the tool's own dirs) are left out.
    """
    entries: dict[str, str] = {}
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(root / rel_dir) as scan:
            for entry in scan:
                if not rel_dir and entry.name in excluded:
                    continue
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                entries[rel] = _fingerprint(entry)
                if entries[rel] == "dir":
                    pending.append(rel)
    return entries


def _fingerprint(entry: os.DirEntry[str]) -> str:
    """How one directory entry must look after a correct restore."""
    if entry.is_symlink():
        return f"link:{os.readlink(entry.path)}"
    if entry.is_dir():
        return "dir"
    if not entry.is_file():
        return "special"
    with open(entry.path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return f"{'x' if entry.stat().st_mode & 0o100 else '-'}:{digest}"


def verify(root: Path, expected: dict[str, str], excluded: frozenset[str], what: str) -> None:
    """Fail loudly when the restored folder differs from what was sealed."""
    actual = manifest(root, excluded)
    if actual == expected:
        return
    missing = sorted(expected.keys() - actual.keys())
    extra = sorted(actual.keys() - expected.keys())
    changed = sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k])
    raise BenchError(
        f"{what}: restored tree differs from the sealed one: "
        f"{len(missing)} missing {missing[:10]}, {len(extra)} unexpected "
        f"{extra[:10]}, {len(changed)} different {changed[:10]}"
    )


def wipe(root: Path) -> None:
    """Delete everything inside root (like `rm -rf root/* root/.*`), keep root."""
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def durable_sync() -> float:
    """`os.sync()`, timed: the write-back a step left behind is part of that step's cost."""
    started = time.perf_counter()
    os.sync()
    return time.perf_counter() - started


def machine_facts(workdir: Path, load_before: float | None = None) -> dict[str, object]:
    """What a reader needs to judge the numbers: cores, CPU, memory, Python, the scratch
    dir's file system (overlay and tmpfs time differently) and the load at the start."""
    import platform

    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu": proc_field("/proc/cpuinfo", "model name"),
        "memory": _memory(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "workdir_fs": _filesystem(workdir),
        "load_before": load_before,
    }


def proc_field(path: str, key: str) -> str:
    """First `key: value` in a /proc file ('unknown' elsewhere)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a running process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_write_bytes(pid: int) -> int:
    """Bytes a running process caused to be written to storage (/proc/PID/io write_bytes)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def _memory() -> str:
    """Total RAM in GiB, from /proc/meminfo ('unknown' elsewhere)."""
    field_ = proc_field("/proc/meminfo", "MemTotal").split()
    if not field_ or not field_[0].isdigit():
        return "unknown"
    return f"{int(field_[0]) / (1024 * 1024):.1f} GiB RAM"


def _filesystem(path: Path) -> str:
    """Filesystem type of the mount holding `path`."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind
