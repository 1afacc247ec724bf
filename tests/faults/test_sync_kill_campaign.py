"""A SIGKILL campaign over sync: `sync --push`, `sync --pull`, `clone` and `sync --follow`
killed at random moments through a folder remote, then the next commands a user runs (issue 22:
"a SIGKILL campaign over push, pull, clone and --follow (>= 40 kills) with nothing lost").

Two machines (two stores) share one folder remote. Each operation starts from its own prepared
world (built once, put back before every kill): push — A holds edits it never pushed; pull — A
pushed a state B has not pulled; clone — a third folder clones the remote; follow — A follows
the ref with edits to send. A kill lands at a moment drawn between the command's start and its
measured length (one uninterrupted run first), and the commands run as processes forked from
one that imported the package (harness.Zygote), each SIGKILLed for real.

What a user must observe afterwards, whatever the kill hit:
- the next command answers a result or a structured error, never `internal` or a traceback;
- push: A's folder unchanged, the push again succeeds, and B's pull then holds A's state;
- pull: B's folder byte-exact its old state or the new one once the next command ran (never
  half), no intent left, and the pull again holds A's state;
- clone: the destination absent, empty or a whole clone; the clone again (or the one that
  finished) holds A's state and pulls `up_to_date`; the parent folder holds nothing else;
- follow: A's folder unchanged, and a push then a pull on B bring B to A's state;
- every time: `verify` ok on both stores, and `remote check --read-data` ok on the remote.

TILLAGE_KILL_ROUNDS multiplies the kills, TILLAGE_KILL_SEED picks other moments (fixed under
CI), TILLAGE_KILL_REPORT=path appends one line per kill.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.campaign import BASE_SEED, ROUNDS, Findings, answered
from tests.faults.harness import START_MARK, Killed, Zygote, intent_files, manifest
from tests.faults.universes import fast_tmp

pytestmark = pytest.mark.slow

KILLS_PER_OP = 10  # x 4 operations: the 40 kills
RETRIES = 3  # runs a kill may miss (it finished first) before the kill counts as nowhere
OPS = ("push", "pull", "clone", "follow")


@dataclass
class SyncWorld:
    """One operation's prepared world under `root` (A's and B's stores and folders, the
    remote, the key file), kept as it was in `pristine` and put back before every kill."""

    op: str
    root: Path
    pristine: Path
    zygote: Zygote
    length: float = 0.0  # seconds an uninterrupted run of the operation took

    @property
    def a(self) -> Till:
        return Till(self.root / "home-a", self.root / "user", self.root / "a")

    @property
    def b(self) -> Till:
        return Till(self.root / "home-b", self.root / "user", self.root / "b")

    @property
    def remote(self) -> str:
        return str(self.root / "remote")

    @property
    def key_file(self) -> Path:
        return self.root / "user" / "remote.key"

    def restore(self) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(self.pristine, self.root, symlinks=True)

    def killed_command(self) -> tuple[Till, list[str]]:
        """Who runs the operation, and its words."""
        if self.op == "push":
            return self.a, ["--json", "sync", "--push"]
        if self.op == "pull":
            return self.b, ["--json", "sync", "--pull"]
        if self.op == "clone":
            parent = Till(self.b.home, self.b.user_home, self.root)
            words = ["--json", "clone", self.remote, "c", "--key-file", str(self.key_file)]
            return parent, words
        return self.a, ["--json", "sync", "--follow", "--poll-seconds", "0.05"]


def _write_state(folder: Path, rng: random.Random, tag: str, files: int) -> None:
    """Files of a state: text, a bigger binary, a folder or two (enough for a push to take
    a while, small enough for the campaign to be quick)."""
    for i in range(files):
        sub = folder / f"pkg{i % 4}"
        sub.mkdir(exist_ok=True)
        (sub / f"m{i}.py").write_text(f"# {tag} {i}\n" + "x = 1\n" * rng.randrange(1, 200))
    (folder / "data.bin").write_bytes(rng.randbytes(1 << 20))
    (folder / ".env").write_text(f"TOKEN={tag}\n")


def build_world(op: str, base: Path, zygote: Zygote) -> SyncWorld:
    root = base / op
    world = SyncWorld(op, root, base / f"{op}.pristine", zygote)
    (root / "user").mkdir(parents=True)
    (root / "a").mkdir()
    a = world.a
    rng = random.Random(7)
    _write_state(root / "a", rng, "first", 60)
    a.json("watch", "--no-daemon")
    added = a.json("remote", "add", world.remote, "--key-file", str(world.key_file))
    assert added["key_file"] == str(world.key_file)
    a.json("sync", "--push")
    Till(world.b.home, world.b.user_home, root).json(
        "clone", world.remote, "b", "--key-file", str(world.key_file)
    )
    if op in ("push", "follow", "pull"):
        _write_state(root / "a", rng, "second", 80)
        (root / "a" / "pkg0" / "m0.py").unlink()
        a.json("snap")
    if op == "pull":
        a.json("sync", "--push")
    shutil.copytree(root, world.pristine, symlinks=True)
    world.length = _measure(world)
    return world


def _measure(world: SyncWorld) -> float:
    """The length of one uninterrupted run (a follower: long enough for a few cycles)."""
    if world.op == "follow":
        return 1.5
    till, words = world.killed_command()
    ran = world.zygote.run(till, words)
    assert ran.returncode == 0, (ran.returncode, ran.stdout[-2000:], ran.stderr[-2000:])
    world.restore()
    return (ran.end_ns - ran.start_ns) / 1e9


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], SyncWorld]]:
    built: dict[str, SyncWorld] = {}
    zygote = Zygote()
    fast = fast_tmp()
    base = (
        Path(tempfile.mkdtemp(prefix="tillage-sync-campaign-", dir=fast))
        if fast is not None
        else tmp_path_factory.mktemp("sync-campaign")
    )

    def world(op: str) -> SyncWorld:
        if op not in built:
            built[op] = build_world(op, base, zygote)
        return built[op]

    try:
        yield world
    finally:
        zygote.close()
        if fast is not None:
            shutil.rmtree(base, ignore_errors=True)


def _kill(world: SyncWorld, seed: int) -> Killed:
    """Kills the operation at a moment drawn within its length; a run that finished first
    shortens the length (a warm run is quicker than the measured one) and is tried again."""
    till, words = world.killed_command()
    rng = random.Random(seed)
    for attempt in range(RETRIES + 1):
        if attempt:
            world.restore()
        delay = rng.uniform(0, world.length)
        killed = world.zygote.run(till, words, anchor=START_MARK, kill_after=delay)
        if killed.returncode != 0:
            return killed
        world.length = min(world.length, (killed.end_ns - killed.start_ns) / 1e9) * 0.8
    return killed


def _same(found: Findings, folder: Path, want: dict[str, object], what: str) -> bool:
    return found.check(manifest(folder) == want, f"{what}: {folder.name} is not as expected")


def _check_stores(found: Findings, world: SyncWorld) -> None:
    for machine in (world.a, world.b):
        run = machine("--json", "verify")
        doc = answered(found, run, "verify")
        found.check(doc is not None and doc.get("ok") is True, f"verify not ok: {run.stdout}")
        found.check(intent_files(machine.home) == [], f"intents left in {machine.home.name}")
    run = world.a("--json", "remote", "check", "--read-data")
    doc = answered(found, run, "remote check --read-data")
    found.check(doc is not None and doc.get("ok") is True, f"remote check: {run.stdout[-800:]}")


def _after_push(found: Findings, world: SyncWorld, before: dict[str, object]) -> None:
    a, b = world.a, world.b
    _same(found, a.cwd, before, "A after the killed push")
    answered(found, a("--json", "status"), "status")
    again = a("--json", "sync", "--push")
    found.check(again.code == 0, f"push again: {again.stdout[-800:]}")
    pulled = b("--json", "sync", "--pull")
    found.check(pulled.code == 0, f"B's pull: {pulled.stdout[-800:]}")
    _same(found, b.cwd, before, "B after pulling the pushed state")


def _after_pull(found: Findings, world: SyncWorld, old: dict[str, object]) -> None:
    a, b = world.a, world.b
    new = manifest(a.cwd)
    answered(found, b("--json", "status"), "status")
    now = manifest(b.cwd)
    found.check(now in (old, new), "B's folder is neither its old state nor the pulled one")
    found.check(intent_files(b.home) == [], "the killed pull's intent was not finished")
    again = b("--json", "sync", "--pull")
    found.check(again.code == 0, f"pull again: {again.stdout[-800:]}")
    _same(found, b.cwd, new, "B after pulling again")
    # And B goes on: its own edit reaches A by a fast-forward.
    (b.cwd / "from-b.txt").write_text("b\n")
    pushed = b("--json", "sync", "--push")
    found.check(pushed.code == 0, f"B's push: {pushed.stdout[-800:]}")
    back = a("--json", "sync", "--pull")
    found.check(back.code == 0 and back.doc.get("disposition") == "fast_forwarded", back.stdout)


def _after_clone(found: Findings, world: SyncWorld, want: dict[str, object]) -> None:
    dest = world.root / "c"
    parent, words = world.killed_command()
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        found.check(manifest(dest) == want, "a clone left a folder that is not a whole clone")
    again = parent(*words)
    whole = dest.is_dir() and manifest(dest) == want
    if again.code != 0:
        found.check(whole, f"clone again failed: {again.stdout[-800:]}")
    _same(found, dest, want, "the clone")
    c = Till(world.b.home, world.b.user_home, dest)
    pulled = c("--json", "sync", "--pull")
    found.check(pulled.code == 0 and pulled.doc.get("disposition") == "up_to_date", pulled.stdout)
    leftovers = sorted(p.name for p in world.root.iterdir() if p.name not in KNOWN_ROOT)
    found.check(leftovers == [], f"the clone left {leftovers} beside it")


KNOWN_ROOT = {"a", "b", "c", "user", "home-a", "home-b", "remote"}


def _after_follow(found: Findings, world: SyncWorld, before: dict[str, object]) -> None:
    a, b = world.a, world.b
    answered(found, a("--json", "status"), "status")
    _same(found, a.cwd, before, "A after the killed follower")
    pushed = a("--json", "sync", "--push")
    found.check(pushed.code == 0, f"push after the follower: {pushed.stdout[-800:]}")
    pulled = b("--json", "sync", "--pull")
    found.check(pulled.code == 0, f"B's pull: {pulled.stdout[-800:]}")
    _same(found, b.cwd, before, "B after the follower's state")


@pytest.mark.parametrize("op", OPS)
def test_a_killed_sync_loses_nothing(op: str, worlds: Callable[[str], SyncWorld]) -> None:
    world = worlds(op)
    failures: list[str] = []
    for n in range(KILLS_PER_OP * ROUNDS):
        seed = BASE_SEED * 1000 + OPS.index(op) * 100 + n
        world.restore()
        before_a = manifest(world.a.cwd)
        before_b = manifest(world.b.cwd)
        killed = _kill(world, seed)
        found = Findings(f"{op} kill {n} (seed {seed})")
        found.landed = f"after {killed.last()}" if killed.returncode == -9 else "nowhere"
        if op == "push":
            _after_push(found, world, before_a)
        elif op == "pull":
            _after_pull(found, world, before_b)
        elif op == "clone":
            _after_clone(found, world, before_a)
        else:
            _after_follow(found, world, before_a)
        _check_stores(found, world)
        found.report()
        if found.problems:
            failures.append(
                f"{found.scenario} (landed {found.landed}): " + "; ".join(found.problems)
            )
    assert not failures, "\n".join(failures)
