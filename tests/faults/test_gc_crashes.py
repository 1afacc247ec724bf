"""A gc killed or failing at every step, killed at random moments, run beside seals and rewinds,
and followed by a lost index (INV-4, INV-5, INV-14).

Every test starts from one store built once per module: a workspace sealed seven times days
apart (`TILLAGE_NOW`), whose `node_modules/` and `dist/` bytes change at every seal, plus a
second workspace forgotten with `--purge`. A gc at NOW removes two snapshots, thins three (their
dependency and build bytes), deletes two packs whole and rewrites four. The reference is the
same store, byte for byte, after a gc nothing interrupted.

After a crash, a user must find: every snapshot the gc keeps restores byte-exact (a thinned one
every path but those whose bytes are gone, which it names in `missing` and leaves as they are);
`till verify` says ok; the timeline is the one before the gc when its fact was not published,
else the gc's (removed snapshots answer not_found); and the next `till gc --yes` finishes the
job: the store then holds the reference's objects in about the reference's bytes, and its log
the reference's one `gc` fact.

The random kills take the kill campaign's knobs (tests/faults/test_kill_campaign.py): fixed
seeds under CI, else random unless TILLAGE_KILL_SEED is set; TILLAGE_KILL_ROUNDS=n runs n rounds
of the six phases; TILLAGE_KILL_REPORT=path appends one JSON line per scenario.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, Till
from tests.faults.harness import (
    GC_FAILPOINTS,
    Killed,
    Manifest,
    assert_crashed,
    crash,
    has_open,
    held,
    log_path,
    manifest,
    noise,
    pack_bytes,
    records,
    remove_index,
    run_marked,
    write_state,
)
from tillage.store.packs import scan_pack
from tillage.store.publog import GENESIS, PublicationLog

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
HOUR = 3600
DAY = 86_400
NOW = T0 + 12 * DAY  # every gc here runs at this time

# The workspace's seals: S0 and S1 share a UTC day (S0 goes), S3 and S4 an hour (S3 goes);
# S1, S2 and S4 are past the 3-day window of dependency and build bytes (thinned); S5 is in the
# keep-all day and S6 is the head.
SEALED_AT = (
    T0,
    T0 + 2 * HOUR,
    T0 + 5 * DAY,
    T0 + 8 * DAY,
    T0 + 8 * DAY + 20 * 60,
    T0 + 11 * DAY + 12 * HOUR,
    T0 + 12 * DAY - HOUR,
)
REMOVED = (0, 3)
THINNED = (1, 2, 4)
# Paths whose class has a 3-day byte window: what a thinned snapshot may no longer restore.
THINNABLE = ("node_modules/", "dist/")

# A kill at these publication steps leaves the gc's fact unpublished / published.
UNPUBLISHED_AT = ("publog.before_append",)
PUBLISHED_AT = ("publish.after_log",)
GC_MARKERS = ("publog.before_append", "publish.after_log", *GC_FAILPOINTS)

ROUNDS = int(os.environ.get("TILLAGE_KILL_ROUNDS", "1"))
_SEED_ENV = os.environ.get("TILLAGE_KILL_SEED")
BASE_SEED = int(_SEED_ENV) if _SEED_ENV else 0 if os.environ.get("CI") else random.randrange(10**4)
REPORT = os.environ.get("TILLAGE_KILL_REPORT")


def at(seconds: int) -> dict[str, str]:
    return {"TILLAGE_NOW": str(seconds)}


class Clocked(Till):
    """`till` with its clock pinned at NOW (TILLAGE_NOW) unless a call says otherwise."""

    def env(self) -> dict[str, str]:
        return {**super().env(), **at(NOW)}


def state(n: int) -> dict[str, Any]:
    """The workspace at its n-th seal: source that changes a little, dependency and build bytes
    that change whole, and bytes every seal shares."""
    return {
        "src/main.py": f"print({n})\n".encode(),
        "src/shared.py": b"SHARED = True\n" * 200,
        "bin/run.sh": ("exec", b"#!/bin/sh\necho run\n"),
        "link": ("link", "src/main.py"),
        "empty": ("dir",),
        "docs/guide.md": b"# guide\n" * 50,
        "node_modules/lib/index.js": noise(100 + n, 300_000),
        "node_modules/lib/package.json": b'{"name": "lib"}\n',
        "dist/app.js": noise(200 + n, 50_000),
    }


# -- the store every test starts from ------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    """The module's store, its folder (moved away from the root the store knows, so each test's
    copy is followed to its own folder), and what the uninterrupted gc made of it."""

    home: Path
    folder: Path
    ids: tuple[str, ...]
    sealed: dict[str, Manifest]  # snapshot -> the folder when it was sealed
    objects: frozenset[bytes]  # the reference: records in its packs after the gc
    pack_bytes: int
    gc_facts: tuple[dict[str, Any], ...]
    grades: dict[str, str]  # snapshot -> grade, after the gc

    @property
    def removed(self) -> set[str]:
        return {self.ids[i] for i in REMOVED}

    @property
    def thinned(self) -> set[str]:
        return {self.ids[i] for i in THINNED}


def gc_facts(home: Path) -> tuple[dict[str, Any], ...]:
    """The `gc` facts of the store's log (a torn last line is no fact)."""
    log = PublicationLog(log_path(home))
    return tuple(dict(r.body) for r in log.read_from(0, GENESIS) if r.kind == "gc")


def object_ids(home: Path) -> list[bytes]:
    return [r.id for r in records(home)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    top = tmp_path_factory.mktemp("gc-base")
    user_home = top / "home"
    folder = user_home / "project"
    other = user_home / "other"
    folder.mkdir(parents=True)
    other.mkdir()
    till = Clocked(top / "store", user_home, folder)

    # Another workspace, purged: its pack holds nothing anything keeps.
    write_state(other, {"blob.bin": noise(99, 400_000), "notes.txt": b"other\n"})
    till.json("watch", "--no-daemon", cwd=other, env=at(T0 - DAY))
    till.json("forget", "--purge", "--yes", cwd=other, env=at(T0 - DAY))
    shutil.rmtree(other)

    ids: list[str] = []
    sealed: dict[str, Manifest] = {}
    for n, when in enumerate(SEALED_AT):
        write_state(folder, state(n))
        if n == 0:
            snapshot = till.json("watch", "--no-daemon", env=at(when))["head"]["id"]
        else:
            snapshot = till.json("snap", "-m", f"S{n}", env=at(when))["snapshot"]["id"]
        ids.append(snapshot)
        sealed[snapshot] = manifest(folder)

    # The reference: the same store, collected by a gc nothing interrupts.
    reference = top / "reference"
    shutil.copytree(till.home, reference, symlinks=True)
    ref = Clocked(reference, user_home, folder)
    doc = ref.json("gc", "--yes")
    assert set(doc["removed"]) == {ids[i] for i in REMOVED}, doc
    assert set(doc["thinned"]) == {ids[i] for i in THINNED}, doc
    before = {
        p.name: [r.id for r in scan_pack(p).records] for p in (till.home / "packs").glob("*.pack")
    }
    after = object_ids(reference)
    kept_packs = {p.name for p in (reference / "packs").glob("*.pack")}
    gone = [name for name in before if name not in kept_packs]
    rewritten = [name for name in gone if set(before[name]) & set(after)]
    assert len(gone) - len(rewritten) >= 2, "the gc deletes fewer than two packs whole"
    assert len(rewritten) >= 2, "the gc rewrites fewer than two packs"
    assert len(after) == len(set(after)), "the reference holds an object twice"
    grades = {s["id"]: s["grade"] for s in ref.json("timeline", "-n", "1000")["snapshots"]}

    # The root the store knows goes away: each test's copy of the store follows its own copy.
    pristine = top / "pristine"
    folder.rename(pristine)
    return Base(
        till.home,
        pristine,
        tuple(ids),
        sealed,
        frozenset(after),
        pack_bytes(reference),
        gc_facts(reference),
        grades,
    )


def copy_of(base: Base, tmp_path: Path, name: str = "t") -> Clocked:
    """A private copy of the base store and its folder, the store told where the folder is."""
    top = tmp_path / name
    user_home = top / "home"
    folder = user_home / "project"
    user_home.mkdir(parents=True)
    shutil.copytree(base.home, top / "store", symlinks=True)
    shutil.copytree(base.folder, folder, symlinks=True)
    till = Clocked(top / "store", user_home, folder)
    status = till.json("status")  # follows the moved folder (an `attach` fact) before any gc
    assert status["head"]["id"] == base.ids[-1], status
    return till


# -- what a user observes after a crashed gc -------------------------------------------------


@dataclass
class Findings:
    """Every broken expectation of one crash, so one run shows them all."""

    what: str
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> bool:
        if not ok:
            self.problems.append(problem)
        return ok

    def done(self) -> None:
        if REPORT:
            with open(REPORT, "a") as f:
                f.write(json.dumps({"scenario": self.what, "problems": self.problems}) + "\n")
        assert not self.problems, f"{self.what}:\n- " + "\n- ".join(self.problems)


def answer(found: Findings, run: Run, command: str) -> dict[str, Any] | None:
    """The command's one JSON result, or None (and a finding) when it failed."""
    found.check("Traceback" not in run.stderr, f"`till {command}` printed a traceback")
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        found.check(False, f"`till {command}` exited {run.code} with no JSON: {run.stderr[-600:]}")
        return None
    if not found.check(run.code == 0, f"`till {command}` failed: {run.stdout[:600]}"):
        return None
    return doc if isinstance(doc, dict) else None


def verified(found: Findings, till: Till, when: str, *args: str) -> None:
    doc = answer(found, till("--json", "verify", *args), f"verify {' '.join(args)}")
    if doc is not None:
        found.check(
            doc.get("ok") is True,
            f"`till verify {' '.join(args)}` {when}: ok={doc.get('ok')} "
            f"problems={json.dumps(doc.get('problems'))[:700]}",
        )


def the_next_gc_finishes(found: Findings, till: Till, base: Base, tmp_path: Path) -> None:
    """Runs the next gc on a copy of the crashed store and compares it with the reference."""
    resumed = Clocked(tmp_path / "resumed", till.user_home, till.cwd)
    shutil.copytree(till.home, resumed.home, symlinks=True)
    if answer(found, resumed("--json", "gc", "--yes"), "gc --yes (the next one)") is None:
        return
    ids = object_ids(resumed.home)
    found.check(
        set(ids) == base.objects,
        f"after the next gc the store holds {len(set(ids) - base.objects)} objects the "
        f"uninterrupted gc removed and lacks {len(base.objects - set(ids))} it kept",
    )
    size = pack_bytes(resumed.home)
    found.check(
        abs(size - base.pack_bytes) <= max(8192, base.pack_bytes // 50),
        f"after the next gc the packs hold {size} bytes, the uninterrupted gc's {base.pack_bytes}",
    )
    facts = gc_facts(resumed.home)
    found.check(
        facts == base.gc_facts,
        f"the log holds the gc facts {facts}, the uninterrupted gc's {base.gc_facts}",
    )


def the_timeline_is(found: Findings, till: Till, base: Base, *, published: bool) -> list[str]:
    """Checks the timeline is the one before the gc or the gc's; returns the snapshots to
    restore: those whose packs the gc rewrites or deletes (S5's pack it never touches, and S5
    shares every other object with the head), then the head."""
    doc = answer(found, till("--json", "timeline", "-n", "1000"), "timeline")
    if doc is None:
        return []
    grades = {s["id"]: s["grade"] for s in doc["snapshots"]}
    if published:
        found.check(
            grades == base.grades,
            f"after a crash past its fact the timeline is {grades}, not the gc's {base.grades}",
        )
        for snapshot in sorted(base.removed):
            run = till("--json", "show", snapshot)
            name = run.doc.get("error", {}).get("name") if run.stdout.startswith("{") else None
            found.check(
                run.code == 1 and name == "snapshot.not_found",
                f"`till show` of the removed {snapshot[:12]} answered {run.stdout[:300]}",
            )
    else:
        found.check(
            grades == dict.fromkeys(base.ids, "exact"),
            f"a crash before its fact changed the timeline: {grades}",
        )
    moved = base.thinned | base.removed
    return [s for s in base.ids if s in grades and s in moved] + [base.ids[-1]]


def restores(found: Findings, till: Till, base: Base, snapshots: list[str]) -> None:
    """Rewinds to each snapshot: byte-exact, but for the paths whose bytes a gc dropped, which
    it names in `missing` and leaves as the folder held them."""
    for snapshot in snapshots:
        before = manifest(till.cwd)
        doc = answer(found, till("--json", "rewind", snapshot, "--yes"), f"rewind {snapshot[:12]}")
        if doc is None:
            continue
        missing = {m["path"]: m for m in doc.get("missing", ())}
        for path, item in missing.items():
            found.check(
                snapshot in base.thinned
                and path.startswith(THINNABLE)
                and item["class"] in ("dependency", "build"),
                f"the rewind to {snapshot[:12]} lists {item} missing",
            )
        want = dict(base.sealed[snapshot])
        for path in missing:
            if path in before:
                want[path] = before[path]
            else:
                want.pop(path, None)
        now = manifest(till.cwd)
        differ = sorted(p for p in set(now) | set(want) if now.get(p) != want.get(p))
        found.check(
            not differ,
            f"the rewind to {snapshot[:12]} (missing {sorted(missing)}) left {differ} other "
            "than sealed",
        )


def check_after_crash(
    found: Findings, till: Clocked, base: Base, tmp_path: Path, *, published: bool
) -> None:
    """Everything a user must find after a gc that stopped anywhere (see the module's doc)."""
    the_next_gc_finishes(found, till, base, tmp_path)
    verified(found, till, "after the crash")
    restores(found, till, base, the_timeline_is(found, till, base, published=published))


# -- killed or failing at every step ---------------------------------------------------------


# Every gc failpoint, and the gc's publication before (not published) and after its log line
# is written (published, the index not told yet): killed, and failing in the process.
CRASHES = [
    *((fp, action) for fp in (*UNPUBLISHED_AT, *GC_FAILPOINTS) for action in ("raise", "kill")),
    *((fp, "raise") for fp in PUBLISHED_AT),  # killed there is killed at gc.after_publish
]


@pytest.mark.parametrize(("failpoint", "action"), CRASHES)
def test_a_gc_that_crashes_at_any_step_loses_nothing_and_the_next_gc_finishes_it(
    base: Base, tmp_path: Path, failpoint: str, action: str
) -> None:
    till = copy_of(base, tmp_path)
    proc = crash(till, failpoint, action, "--json", "gc", "--yes")
    assert_crashed(proc, failpoint, action)
    published = failpoint not in UNPUBLISHED_AT
    assert bool(gc_facts(till.home)) == published
    found = Findings(f"a gc {'killed' if action == 'kill' else 'failing'} at {failpoint}")
    check_after_crash(found, till, base, tmp_path, published=published)
    found.done()


# -- the index is a cache: a crashed gc's decision survives losing it ---------------------------


@pytest.mark.parametrize(
    "failpoint", ["gc.after_publish", "gc.after_index", "gc.after_first_delete"]
)
def test_a_lost_index_after_a_crashed_gc_never_brings_removed_snapshots_back(
    base: Base, tmp_path: Path, failpoint: str
) -> None:
    """The removed snapshots' records still sit in the old packs; the rebuilt index remembers
    from the gc fact that they were dropped, so neither a rebuild nor `verify --repair`
    publishes them again."""
    till = copy_of(base, tmp_path)
    assert_crashed(crash(till, failpoint, "kill", "--json", "gc", "--yes"), failpoint, "kill")
    left = set(object_ids(till.home))
    assert {bytes.fromhex(s) for s in base.removed} & left, "the test would be vacuous"
    remove_index(till.home)
    found = Findings(f"an index lost after a gc killed at {failpoint}")
    the_timeline_is(found, till, base, published=True)  # rebuilt on open
    verified(found, till, "--repair after losing the index", "--repair")
    targets = the_timeline_is(found, till, base, published=True)
    remove_index(till.home)  # and once more, for the next gc to rebuild it
    the_next_gc_finishes(found, till, base, tmp_path)
    verified(found, till, "after the rebuild")
    restores(found, till, base, targets)
    found.done()


# -- SIGKILL at random moments ---------------------------------------------------------------

# (anchor failpoint, end of the window the kill moment is drawn in); "anywhere" kills the real
# `python -m tillage` a random moment after it starts, deciding included.
GC_PHASES: dict[str, tuple[str | None, str | None]] = {
    "anywhere": (None, None),
    "publishing": ("publog.before_append", "gc.after_publish"),
    "copying": ("gc.after_publish", "gc.after_copy"),
    "syncing": ("gc.after_copy", "gc.after_pack_fsync"),
    "indexing": ("gc.after_pack_fsync", "gc.after_index"),
    "deleting": ("gc.after_index", None),
}


@dataclass(frozen=True)
class Scenario:
    phase: str
    seed: int

    @property
    def id(self) -> str:
        return f"gc-seed{self.seed}-{self.phase}"


def scenarios() -> Iterator[Scenario]:
    """Every phase once per round, each with its own seed."""
    for r in range(ROUNDS):
        for i, phase in enumerate(GC_PHASES):
            yield Scenario(phase, BASE_SEED * 100_000 + r * 100 + 80 + i)


def _windows(run: Killed) -> dict[str, float]:
    return {name: max(run.span(a, b), 0.001) for name, (a, b) in GC_PHASES.items()}


@pytest.fixture(scope="module")
def windows(base: Base, tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """How long each phase of this gc lasts on this machine: one marked run, to the end."""
    till = copy_of(base, tmp_path_factory.mktemp("gc-timing"))
    run = run_marked(till, ["--json", "gc", "--yes"], markers=GC_MARKERS)
    assert run.returncode == 0, run
    return _windows(run)


def _landing(killed: Killed, home: Path) -> str:
    if killed.returncode == 0:
        return "after the gc finished"
    if killed.returncode != -9:
        return f"nowhere: exit {killed.returncode}: {killed.stderr[-400:]}"
    if killed.marks:
        return f"after {killed.marks[-1][0]}"
    return "after its fact" if gc_facts(home) else "before its fact"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.id) for s in scenarios()])
def test_a_gc_killed_at_a_random_moment_loses_nothing_and_the_next_gc_finishes_it(
    base: Base, tmp_path: Path, windows: dict[str, float], scenario: Scenario
) -> None:
    till = copy_of(base, tmp_path)
    rng = random.Random(scenario.seed)
    anchor, stop = GC_PHASES[scenario.phase]
    real = anchor is None and stop is None
    delay = rng.uniform(0, windows[scenario.phase])
    killed = run_marked(
        till,
        ["--json", "gc", "--yes"],
        anchor=anchor,
        kill_after=delay,
        marked=not real,
        markers=GC_MARKERS,
    )
    if killed.returncode == 0 and not real:  # it finished first: the phases were shorter
        for name, length in _windows(killed).items():
            if length > 0.001:
                windows[name] = min(windows[name], length)
    found = Findings(
        f"{scenario.id} (killed {delay * 1000:.1f} ms in, {_landing(killed, till.home)})"
    )
    found.check(killed.returncode in (0, -9), f"the gc ended {killed.returncode}: {killed.stderr}")
    published = bool(gc_facts(till.home))
    check_after_crash(found, till, base, tmp_path, published=published)
    found.done()


# -- seals and rewinds while a gc runs ---------------------------------------------------------


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def start(till: Till, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Starts `till ARGS` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "tillage", *args],
        cwd=till.cwd,
        env={**till.env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def waiting_for_the_gc(proc: subprocess.Popen[str], till: Till, what: str) -> None:
    """Waits until `proc` stands at the store's maintenance lock (which the held gc holds),
    then checks it has published nothing meanwhile."""
    log = log_path(till.home).read_bytes()
    wait_until(
        lambda: proc.poll() is not None or has_open(proc.pid, "maintenance.lock"),
        f"{what} reaches the maintenance lock",
    )
    assert proc.poll() is None, f"{what} did not wait for the gc: {proc.communicate()}"
    assert log_path(till.home).read_bytes() == log, f"{what} published while the gc ran"


def finished(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out)


@pytest.mark.parametrize("hold_at", ["gc.after_publish", "gc.after_index"])
def test_a_seal_during_a_gc_waits_and_keeps_the_bytes_the_gc_is_dropping(
    base: Base, tmp_path: Path, hold_at: str
) -> None:
    """The folder goes back to S1's dependency and build bytes, which this gc drops from the
    store, and is sealed while the gc runs: the seal waits, then holds every byte it sealed."""
    till = copy_of(base, tmp_path)
    spec = state(6)
    old = state(1)
    spec["node_modules/lib/index.js"] = old["node_modules/lib/index.js"]
    spec["dist/app.js"] = old["dist/app.js"]
    spec["src/main.py"] = b"print('sealed during a gc')\n"
    write_state(till.cwd, spec)
    during = manifest(till.cwd)
    found = Findings(f"a seal while a gc stands at {hold_at}")
    with held(till, hold_at, "--json", "gc", "--yes") as gc:
        seal = start(till, "--json", "snap", "-m", "during", env=at(NOW + 60))
        waiting_for_the_gc(seal, till, "`till snap`")
    assert gc.returncode == 0, gc.stderr
    code, doc = finished(seal)
    assert code == 0, doc
    snapshot = doc["snapshot"]["id"]
    assert set(json.loads(gc.stdout)["thinned"]) == base.thinned

    verified(found, till, "after the seal and the gc")
    write_state(till.cwd, state(0))
    rewound = answer(found, till("--json", "rewind", snapshot, "--yes"), "rewind (the new one)")
    if rewound is not None:
        found.check(rewound["missing"] == [], f"the new snapshot misses {rewound['missing']}")
        found.check(manifest(till.cwd) == during, "the new snapshot does not restore byte-exact")
    # The next gc keeps them too: they belong to a snapshot in its keep-all day.
    answer(found, till("--json", "gc", "--yes", env=at(NOW + 2 * HOUR)), "gc (again)")
    verified(found, till, "after the next gc")
    cat = till("--json", "cat", snapshot, "node_modules/lib/index.js")
    found.check(cat.code == 0, f"`till cat` of the sealed dependency failed: {cat.stdout[:300]}")
    found.done()


def test_a_rewind_during_a_gc_waits_and_restores_what_the_gc_kept(
    base: Base, tmp_path: Path
) -> None:
    """A rewind to S2, whose pack the gc is rewriting and whose dependency and build bytes it
    drops, waits for the gc and then restores S2 but for those bytes, which it names."""
    till = copy_of(base, tmp_path)
    target = base.ids[2]
    before = manifest(till.cwd)
    found = Findings("a rewind while a gc rewrites its target's pack")
    with held(till, "gc.after_copy", "--json", "gc", "--yes") as gc:
        rewind = start(till, "--json", "rewind", target, "--yes")
        waiting_for_the_gc(rewind, till, "`till rewind`")
    assert gc.returncode == 0, gc.stderr
    code, doc = finished(rewind)
    assert code == 0, doc
    missing = sorted(m["path"] for m in doc["missing"])
    found.check(
        missing == ["dist/app.js", "node_modules/lib/index.js"],
        f"the rewind names {missing} missing",
    )
    want = dict(base.sealed[target])
    want.update({p: before[p] for p in missing})
    found.check(manifest(till.cwd) == want, "the rewind did not restore what S2 still has")
    verified(found, till, "after the rewind and the gc")
    found.done()


def test_a_rewind_to_a_snapshot_a_running_gc_removes_answers_not_found(
    base: Base, tmp_path: Path
) -> None:
    """The rewind finds S3 before the gc publishes that it goes, and reaches it after: it must
    answer that S3 is gone, touching nothing, not that the store is damaged."""
    till = copy_of(base, tmp_path)
    target = base.ids[3]
    before = manifest(till.cwd)
    with held(till, "publog.before_append", "--json", "gc", "--yes") as gc:
        rewind = start(till, "--json", "rewind", target, "--yes")
        waiting_for_the_gc(rewind, till, "`till rewind`")
    assert gc.returncode == 0, gc.stderr
    assert target in json.loads(gc.stdout)["removed"]
    code, doc = finished(rewind)
    assert manifest(till.cwd) == before
    found = Findings("a rewind to a snapshot a running gc removes")
    found.check(
        code == 1 and doc.get("error", {}).get("name") == "snapshot.not_found",
        f"`till rewind` of the removed snapshot answered {json.dumps(doc)[:400]}",
    )
    verified(found, till, "after the rewind and the gc")
    found.done()
