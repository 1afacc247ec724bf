"""The sync bench's lanes: one tool through one transport, A's folder to a remote and back to B.

    lane          push (A -> remote)                    clone (remote -> B)           pull
    tillage-dir   till sync --push (a folder remote)    till clone DIR B --key K      sync --pull
    tillage-ssh   till sync --push (ssh://...)          till clone ssh://... B        sync --pull
    tillage-s3    till sync --push (s3://, via proxy)   till clone s3://... B         sync --pull
    rsync-local   rsync -a A/ FAR/                      rsync -a FAR/ B/              rsync again
    rsync-ssh     rsync -a -e SSH A/ host:FAR/          rsync -a -e SSH host:FAR/ B/  rsync again
    restic-dir    restic backup . (a local repository)  restic restore latest --target B   -
    restic-sftp   restic backup . (sftp: over our sshd) restic restore latest --target B   -
    restic-s3     restic backup . (s3:, via proxy)      restic restore latest --target B   -

The lanes of one transport read the same source folder (tillage's A; rsync and restic leave
its `.tillage/` out). restic has no incremental pull: a restore into a folder that has one
neither deletes what the snapshot lacks nor is what `till sync --pull` does, so that cell is
left out. Every step returns its facts (bytes sent or received, the ssh client's bytes on the
wire, the S3 proxy's request counts).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import BenchError, tail, tree_bytes
from runners import Tillage
from sync_base import Runner, base_env, du_bytes, wire_bytes
from sync_s3 import S3Site
from sync_sshd import Sshd

RSYNC_SENT = re.compile(r"Total bytes sent: (\d+)")
RSYNC_RECEIVED = re.compile(r"Total bytes received: (\d+)")
RSYNC_FLAGS = ["-a", "--delete", "--exclude=/.tillage", "--stats", "--no-human-readable"]
RESTIC_PASSWORD = "bench"  # restic's lanes read it from RESTIC_PASSWORD
TRANSPORTS = {
    "tillage-dir": "dir",
    "rsync-local": "dir",
    "restic-dir": "dir",
    "tillage-ssh": "ssh",
    "rsync-ssh": "ssh",
    "restic-sftp": "ssh",
    "tillage-s3": "s3",
    "restic-s3": "s3",
}
LANES = tuple(TRANSPORTS)


@dataclass
class Machine:
    """One simulated machine: a TILLAGE_HOME (its store) and a folder."""

    home: Path
    ws: Path

    def till(
        self,
        runner: Runner,
        args: list[str],
        extra: dict[str, str] | None = None,
        repo: bool = True,
        cwd: Path | None = None,
    ) -> dict[str, Any]:
        """`till [--repo WS] --json ARGS` as this machine; its one JSON document."""
        argv = [*Tillage.command, *(["--repo", str(self.ws)] if repo else []), "--json", *args]
        env = {**base_env(), "TILLAGE_HOME": str(self.home), **(extra or {})}
        proc = runner.run(argv, cwd or self.ws, env)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise BenchError(
                f"`{shlex.join(proc.argv)}` did not print one JSON document: {exc}\n"
                f"stdout: {tail(proc.stdout)}"
            ) from exc
        if not isinstance(doc, dict) or "error" in doc:
            raise BenchError(f"`{shlex.join(proc.argv)}` answered {doc!r}")
        return doc


class BaseLane:
    """What every lane has: a name, its transport, the source it reads, where B is, and how a
    step's facts from the wire (ssh logs, S3 requests) are taken."""

    name: str
    root: Path
    src: Path
    back: Path
    logs: Path
    runner: Runner
    sshd: Sshd | None
    s3: S3Site | None
    bucket: str
    pulls = True  # whether the lane has an incremental pull comparable to `till sync --pull`

    def setup(self, name: str, root: Path, src: Path, ctx: LaneContext) -> None:
        self.name, self.root, self.src = name, root, src
        self.logs, self.runner, self.sshd, self.s3 = ctx.logs, ctx.runner, ctx.sshd, ctx.s3
        self.transport = TRANSPORTS[name]
        if self.transport != "ssh":
            self.sshd = None
        if self.transport != "s3":
            self.s3 = None
        self.back = root / "b"
        self.bucket = f"{name}-r{ctx.repeat}"
        root.mkdir(parents=True, exist_ok=True)
        if self.s3 is not None:
            self.s3.create_bucket(self.bucket)

    def source(self) -> Path:
        return self.src

    def dest(self) -> Path:
        return self.back

    def ssh_log(self, step: str) -> Path:
        return self.logs / f"{self.name}-{step}.ssh.log"

    def observed(self, step: str, act: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """Runs `act(ssh log)`, adding the ssh client's bytes on the wire or the S3 proxy's
        counts of what it did."""
        log = self.ssh_log(step)
        if self.s3 is not None:
            self.s3.counts(reset=True)
        facts = act(log)
        if self.sshd is not None:
            facts.update(wire_bytes(log))
        if self.s3 is not None:
            facts["requests"] = self.s3.counts(reset=True)
        return facts

    def setup_steps(self) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        """Steps timed apart before the cold push (sealing, adding the remote, init)."""
        return []

    def pull(self, step: str) -> dict[str, Any] | None:
        """The incremental pull, or None where the tool has no comparable one."""
        return None


@dataclass
class LaneContext:
    """What the lanes of one repeat share."""

    repeat: int
    logs: Path
    runner: Runner
    sshd: Sshd | None
    s3: S3Site | None


class TillLane(BaseLane):
    """tillage through one transport: A (the source folder) pushes, B clones and pulls."""

    def __init__(self, name: str, root: Path, src: Path, ctx: LaneContext) -> None:
        self.setup(name, root, src, ctx)
        self.a = Machine(root / "home-a", src)
        self.b = Machine(root / "home-b", self.back)
        self.a.home.mkdir()
        self.b.home.mkdir()
        self.far = root / "remote"
        if self.sshd is not None:
            self.url = self.sshd.url(self.far)
        elif self.s3 is not None:
            self.url = self.s3.tillage_url(self.bucket)
        else:
            self.url = str(self.far)
        self.key = ""

    def env(self, log: Path, direct: bool = False) -> dict[str, str]:
        if self.sshd is not None:
            return self.sshd.tillage_env(log)
        if self.s3 is not None:
            return self.s3.tillage_env(direct)
        return {}

    def remote_bytes(self) -> int:
        if self.s3 is not None:
            return self.s3.bucket_bytes(self.bucket)[0]
        return du_bytes(self.far)

    def setup_steps(self) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        return [("seal", self.seal), ("remote_add", self.remote_add)]

    def seal(self) -> dict[str, Any]:
        doc = self.a.till(self.runner, ["watch", "--no-daemon"])
        return {"head": doc["head"]["id"]}

    def remote_add(self) -> dict[str, Any]:
        def act(log: Path) -> dict[str, Any]:
            doc = self.a.till(self.runner, ["remote", "add", self.url], self.env(log))
            if not isinstance(doc.get("key"), str):
                raise BenchError(f"`till remote add` generated no key: {doc!r}")
            self.key = doc["key"]
            return {}

        return self.observed("remote-add", act)

    def push(self, step: str) -> dict[str, Any]:
        def act(log: Path) -> dict[str, Any]:
            doc = self.a.till(self.runner, ["sync", "--push"], self.env(log))
            return {
                "bytes_sent": doc["uploaded_bytes"],
                "objects_sent": doc["uploaded_objects"],
                "objects_reused": doc["reused_objects"],
                "snapshot": doc["snapshot"]["id"],
            }

        return self.observed(step, act)

    def clone(self) -> dict[str, Any]:
        def act(log: Path) -> dict[str, Any]:
            args = ["clone", self.url, str(self.b.ws), "--key", self.key]
            doc = self.b.till(self.runner, args, self.env(log), repo=False, cwd=self.root)
            return {"head": doc["head"]["id"]}

        return self.observed("clone", act)

    def pull(self, step: str) -> dict[str, Any] | None:
        def act(log: Path) -> dict[str, Any]:
            doc = self.b.till(self.runner, ["sync", "--pull"], self.env(log))
            if doc.get("disposition") != "fast_forwarded":
                raise BenchError(f"{self.name}: the pull did not fast-forward: {doc!r}")
            return {
                "bytes_received": doc.get("fetched_bytes"),
                "objects_received": doc.get("fetched_objects"),
            }

        return self.observed(step, act)

    # The S3 proxy's overhead, measured once: the same cold push and clone straight to moto.
    def push_direct(self) -> dict[str, Any]:
        assert self.s3 is not None
        bucket = f"{self.bucket}-direct"
        self.s3.create_bucket(bucket)
        env = self.env(Path(), direct=True)
        url = self.s3.tillage_url(bucket)
        doc = self.a.till(self.runner, ["remote", "add", "--name", "direct", url], env)
        self.direct_key = str(doc["key"])
        self.runner.procs = []  # the push alone is timed
        doc = self.a.till(self.runner, ["sync", "--push", "--remote", "direct"], env)
        return {"bytes_sent": doc["uploaded_bytes"], "objects_sent": doc["uploaded_objects"]}

    def clone_direct(self, dest: Path) -> dict[str, Any]:
        assert self.s3 is not None
        home = self.root / "home-direct"
        home.mkdir()
        url = self.s3.tillage_url(f"{self.bucket}-direct")
        args = ["clone", url, str(dest), "--key", self.direct_key]
        env = self.env(Path(), direct=True)
        doc = Machine(home, dest).till(self.runner, args, env, repo=False, cwd=self.root)
        return {"head": doc["head"]["id"]}


class RsyncLane(BaseLane):
    """`rsync -a` of the source folder to a folder (locally or over the same ssh), and back."""

    def __init__(self, name: str, root: Path, src: Path, ctx: LaneContext) -> None:
        self.setup(name, root, src, ctx)
        self.far = root / "far"
        self.far.mkdir()

    def remote_bytes(self) -> int:
        return du_bytes(self.far)

    def _rsync(self, step: str, up: bool) -> dict[str, Any]:
        log = self.ssh_log(step)
        far = self.sshd.rsync_spec(self.far) if self.sshd else f"{self.far}/"
        shell = ["-e", self.sshd.rsync_e(log)] if self.sshd else []
        src, dst = (f"{self.src}/", far) if up else (far, f"{self.back}/")
        proc = self.runner.run(["rsync", *RSYNC_FLAGS, *shell, src, dst], self.src, base_env())
        sent = RSYNC_SENT.search(proc.stdout)
        received = RSYNC_RECEIVED.search(proc.stdout)
        if sent is None or received is None:
            raise BenchError(f"rsync printed no --stats: {tail(proc.stdout)}")
        # The bytes that carried the files: what this side sent when it is the sender (a push,
        # or any local copy: there this process reads the files), else what it received.
        moved = sent if up or self.sshd is None else received
        facts: dict[str, Any] = {"bytes_sent" if up else "bytes_received": int(moved.group(1))}
        return {**facts, **(wire_bytes(log) if self.sshd else {})}

    def push(self, step: str) -> dict[str, Any]:
        return self._rsync(step, up=True)

    def clone(self) -> dict[str, Any]:
        return self._rsync("clone", up=False)

    def pull(self, step: str) -> dict[str, Any] | None:
        return self._rsync(step, up=False)


class ResticLane(BaseLane):
    """restic: `init` (timed apart, as `till remote add` is), `backup .` from inside the source
    folder for a push, `restore latest --target B` for the clone. Each machine has its own
    cache (A's is warm after its first backup, B's starts empty): restic's cache holds the
    repository's index and trees, as tillage's store holds what it sealed and pushed, so
    neither tool is run without what it keeps locally."""

    pulls = False

    def __init__(self, name: str, root: Path, src: Path, ctx: LaneContext) -> None:
        self.setup(name, root, src, ctx)
        self.far = root / "repo"
        if self.sshd is not None:
            self.repo = self.sshd.restic_repo(self.far)
        elif self.s3 is not None:
            self.repo = self.s3.restic_repo(self.bucket)
        else:
            self.repo = str(self.far)

    def remote_bytes(self) -> int:
        if self.s3 is not None:
            return self.s3.bucket_bytes(self.bucket)[0]
        return du_bytes(self.far)

    def _stored(self) -> int:
        """Bytes of the files in the repository (what a push added is the growth)."""
        if self.s3 is not None:
            return self.s3.bucket_bytes(self.bucket)[0]
        return tree_bytes([self.far])[0]

    def restic(
        self, log: Path, cache: str, args: list[str], cwd: Path, repo: str | None = None
    ) -> str:
        env = {**base_env(), "RESTIC_PASSWORD": RESTIC_PASSWORD}
        options: list[str] = []
        if self.sshd is not None:
            options = ["-o", f"sftp.command={self.sshd.sftp_command(log)}"]
        if self.s3 is not None:
            env.update(self.s3.restic_env())
        cache_dir = str(self.root / f"cache-{cache}")
        argv = ["restic", "--repo", repo or self.repo, "--cache-dir", cache_dir, *options, *args]
        return self.runner.run(argv, cwd, env).stdout

    def setup_steps(self) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        return [("remote_add", self.init)]

    def init(self) -> dict[str, Any]:
        return self.observed("init", self._init)

    def _init(self, log: Path) -> dict[str, Any]:
        self.restic(log, "a", ["init"], self.src)
        return {}

    def push(self, step: str) -> dict[str, Any]:
        def act(log: Path) -> dict[str, Any]:
            before = self._stored()
            exclude = f"--exclude={self.src / '.tillage'}"
            out = self.restic(log, "a", ["backup", "--json", exclude, "."], self.src)
            summary = restic_summary(out)
            return {
                "bytes_sent": self._stored() - before,
                "files_new": summary.get("files_new"),
                "files_changed": summary.get("files_changed"),
                "data_added": summary.get("data_added"),
                "snapshot": summary.get("snapshot_id"),
            }

        return self.observed(step, act)

    def clone(self) -> dict[str, Any]:
        def act(log: Path) -> dict[str, Any]:
            args = ["restore", "latest", "--target", str(self.back)]
            self.restic(log, "b", args, self.root)
            if (self.back / ".tillage").exists():
                raise BenchError(f"{self.name}: the restore holds the source's .tillage/")
            return {}

        return self.observed("clone", act)

    # The S3 proxy's overhead, measured once: the same cold push and clone straight to moto.
    def push_direct(self) -> dict[str, Any]:
        assert self.s3 is not None
        bucket = f"{self.bucket}-direct"
        self.s3.create_bucket(bucket)
        repo = self.s3.restic_repo(bucket, direct=True)
        self.restic(Path(), "direct-a", ["init"], self.src, repo)
        self.runner.procs = []  # the backup alone is timed
        exclude = f"--exclude={self.src / '.tillage'}"
        self.restic(Path(), "direct-a", ["backup", "--json", exclude, "."], self.src, repo)
        return {"bytes_sent": self.s3.bucket_bytes(bucket)[0]}

    def clone_direct(self, dest: Path) -> dict[str, Any]:
        assert self.s3 is not None
        repo = self.s3.restic_repo(f"{self.bucket}-direct", direct=True)
        args = ["restore", "latest", "--target", str(dest)]
        self.restic(Path(), "direct-b", args, self.root, repo)
        return {}


def restic_summary(stdout: str) -> dict[str, Any]:
    """The summary line of `restic backup --json` (status lines come before it)."""
    for line in reversed(stdout.splitlines()):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and doc.get("message_type") == "summary":
            return doc
    raise BenchError(f"`restic backup --json` printed no summary: {tail(stdout)}")


LANE_CLASSES: dict[str, type[TillLane] | type[RsyncLane] | type[ResticLane]] = {
    "tillage-dir": TillLane,
    "tillage-ssh": TillLane,
    "tillage-s3": TillLane,
    "rsync-local": RsyncLane,
    "rsync-ssh": RsyncLane,
    "restic-dir": ResticLane,
    "restic-sftp": ResticLane,
    "restic-s3": ResticLane,
}
Lane = TillLane | RsyncLane | ResticLane
