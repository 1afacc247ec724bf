"""The sync bench's timing and checking primitives: a step timed until durable, the
environment the tools run in, bytes on the ssh wire, folder sizes and the file-by-file check.

Shared by bench/sync.py and its lanes (bench/sync_lanes.py), so every tool is timed by the
same code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import BenchError, Proc, durable_sync, manifest, run_measured, tail

MIB = 1024 * 1024
EXCLUDED = frozenset({".tillage"})
WIRE_WAIT_S = 2.0  # how long a session may take to log its byte count after its parent
TRANSFERRED = re.compile(r"Transferred: sent (\d+), received (\d+) bytes")
# What the bench's processes must not inherit from whoever runs it.
SCRUBBED = (
    "PYTHONDONTWRITEBYTECODE",
    "TILLAGE_HOME",
    "TILLAGE_NOW",
    "TILLAGE_RECOVERY_KEY",
    "TILLAGE_SSH",
    "TILLAGE_REMOTE_TILL",
    "TILLAGE_S3_ENDPOINT",
    "TILLAGE_S3_ALLOW_HTTP",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_PROFILE",
    "RESTIC_REPOSITORY",
    "RESTIC_PASSWORD",
    "RESTIC_PASSWORD_FILE",
    "RESTIC_CACHE_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
)

Log = Callable[[str], None]


# -- timing -------------------------------------------------------------------------------------


@dataclass
class Step:
    """One timed step: its processes' wall time plus the `sync` after them, their CPU and peak
    RSS, and what the step reported (bytes sent, fetched, on the wire...)."""

    seconds: float
    sync_s: float
    user_s: float
    sys_s: float
    max_rss_kib: int
    facts: dict[str, Any]
    processes: list[dict[str, Any]]


class Runner:
    """Runs and records the processes of the step under way."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def run(self, argv: list[str], cwd: Path, env: dict[str, str]) -> Proc:
        proc = run_measured(argv, cwd=cwd, env=env)
        self.procs.append(proc)
        if proc.returncode != 0:
            raise BenchError(
                f"`{shlex.join(proc.argv)}` exited {proc.returncode}\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return proc


def timed(runner: Runner, action: Callable[[], dict[str, Any]]) -> Step:
    """Runs `action` after a `sync` (no step pays for an earlier one's write-back), timed until
    durable: its processes' wall time plus the `sync` after them."""
    os.sync()
    runner.procs = []
    facts = action()
    sync_s = durable_sync()
    procs = runner.procs
    return Step(
        seconds=sum(p.seconds for p in procs) + sync_s,
        sync_s=sync_s,
        user_s=sum(p.user_s for p in procs),
        sys_s=sum(p.sys_s for p in procs),
        max_rss_kib=max((p.max_rss_kib for p in procs), default=0),
        facts=facts,
        processes=[
            {
                "command": shlex.join(p.argv),
                "seconds": p.seconds,
                "user_s": p.user_s,
                "sys_s": p.sys_s,
                "max_rss_kib": p.max_rss_kib,
            }
            for p in procs
        ],
    )


def base_env() -> dict[str, str]:
    """This process's environment without tillage's settings (and with bytecode writes on,
    as a user's shell usually is)."""
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED}


def wire_bytes(log: Path) -> dict[str, int | None]:
    """Bytes the ssh client sessions logged in `log` sent and received (None without any).

    A client whose parent exited first (restic's sftp ssh) may still be writing its count:
    every session that authenticated gets up to WIRE_WAIT_S to log its Transferred: line."""
    deadline = time.monotonic() + WIRE_WAIT_S
    text = ""
    while log.exists():
        text = log.read_text(errors="replace")
        if text.count("Authenticated to") <= len(TRANSFERRED.findall(text)):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    sent = received = sessions = 0
    for match in TRANSFERRED.finditer(text):
        sent += int(match.group(1))
        received += int(match.group(2))
        sessions += 1
    if not sessions:
        return {"wire_sent": None, "wire_received": None, "ssh_sessions": 0}
    return {"wire_sent": sent, "wire_received": received, "ssh_sessions": sessions}


def du_bytes(path: Path) -> int:
    """What `du -sb` says of a folder (apparent bytes, directories included)."""
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def check_same(expected: dict[str, str], folder: Path, what: str) -> None:
    actual = manifest(folder, EXCLUDED)
    if actual != expected:
        missing = sorted(expected.keys() - actual.keys())
        extra = sorted(actual.keys() - expected.keys())
        changed = sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k])
        raise BenchError(
            f"{what}: {len(missing)} missing {missing[:5]}, {len(extra)} unexpected "
            f"{extra[:5]}, {len(changed)} different {changed[:5]}"
        )
