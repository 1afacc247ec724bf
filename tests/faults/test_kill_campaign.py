"""A SIGKILL campaign over seal and rewind: random moments, then any command next.

The failpoint tests (test_seal_crashes, test_rewind_crashes) kill at each named durable step;
this campaign kills the real `till` at a random moment inside a measured phase (the pre-rewind
seal, staging, writing the intent, the apply phase, removing the intent; a seal's writing and
its publication), on a workload large enough that each phase lasts long enough to be hit. The
next command is drawn from every command, and the test asserts what a user would observe:

- the next command answers a result or a structured error, never `internal` or a traceback;
- it leaves the folder exactly at the pre-rewind state or at the rewind's target (INV-7), with
  no temporary file or staging folder behind, whichever command it was (issue 6, item 6);
- every snapshot published before the kill is listed and readable, and `verify` says ok: an
  unpublished half-written pack tail is not damage (issue 6, item 11);
- half-written packs of killed seals are given back: the store does not keep their bytes.

Each scenario is named by its seed, the phase it aims at and the next command. Under CI the
seeds are fixed; locally they change per run unless TILLAGE_KILL_SEED is set. One round (every
phase, every next command) runs by default; TILLAGE_KILL_ROUNDS=n runs n rounds with other
pairings and seeds. TILLAGE_KILL_REPORT=path appends one JSON line per scenario (where the kill
landed), to see the campaign's coverage.
"""

from __future__ import annotations

import base64
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.campaign import (
    BASE_SEED,
    ROUNDS,
    Findings,
    answered,
    describe_difference,
    folder_state,
)
from tests.faults.harness import (
    Killed,
    intent_files,
    manifest,
    noise,
    pack_bytes,
    packs,
    published_snapshots,
    run_marked,
    staging_leftovers,
    temp_leftovers,
    write_state,
)
from tillage.store.packs import scan_pack

Spec = dict[str, Any]

MiB = 1 << 20
SMALL_DIRS, SMALL_FILES = 25, 32  # 800 small files

# -- the workload ------------------------------------------------------------------------------


def _small(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(64, 4096))


def _db(rows: int, seed: int) -> bytes:
    """A real SQLite database file's bytes (captured through tillage's SQLite image path)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        rng = random.Random(seed)
        conn.executemany(
            "INSERT INTO t(v) VALUES (?)", [(rng.randbytes(100),) for _ in range(rows)]
        )
        conn.commit()
        return conn.serialize()
    finally:
        conn.close()


def state_a(seed: int) -> Spec:
    """Many small files in nested folders, three 3 MiB files, links, an exec bit, a database."""
    rng = random.Random(seed)
    spec: Spec = {
        f"src/pkg{d:02}/mod{f:02}.py": _small(rng)
        for d in range(SMALL_DIRS)
        for f in range(SMALL_FILES)
    }
    for i in range(3):
        spec[f"assets/blob{i}.bin"] = noise(seed * 10 + i, 3 * MiB)
    spec["bin/run.sh"] = ("exec", b"#!/bin/sh\necho A\n")
    spec["link"] = ("link", "src/pkg00/mod00.py")
    spec["dirlink"] = ("link", "src/pkg01")
    spec["deep/a/b/c/d/e/f/leaf.txt"] = b"leaf A\n"
    spec["empty"] = ("dir",)
    spec["data/app.db"] = _db(300, seed)
    spec["name with spaces \u00e9.txt"] = b"odd name\n"
    return spec


def _edit_small(spec: Spec, rng: random.Random, every: int, offset: int) -> None:
    for d in range(SMALL_DIRS):
        for f in range(offset % every, SMALL_FILES, every):
            path = f"src/pkg{d:02}/mod{f:02}.py"
            if path in spec:
                spec[path] = _small(rng)


def state_b(a: Spec, seed: int) -> Spec:
    """A wreck of A: edits, deletions, additions, type changes both ways, a lost exec bit."""
    rng = random.Random(seed + 1)
    b = dict(a)
    _edit_small(b, rng, 3, 0)
    for d in range(0, SMALL_DIRS, 2):
        del b[f"src/pkg{d:02}/mod{(d * 7) % SMALL_FILES:02}.py"]
    for i in range(50):
        b[f"src/new/gen{i:02}.py"] = _small(rng)
    blob = a["assets/blob0.bin"]
    b["assets/blob0.bin"] = blob[: 2 * MiB] + b"EDITED" + blob[2 * MiB + 6 :]
    del b["assets/blob1.bin"]
    b["bin/run.sh"] = b"#!/bin/sh\necho B\n"
    b["link"] = ("link", "assets/blob2.bin")
    del b["dirlink"]
    b["dirlink/real.txt"] = b"a folder where a link was\n"
    del b["empty"]
    b["empty"] = b"a file where a folder was\n"
    del b["deep/a/b/c/d/e/f/leaf.txt"]
    b["deep/a/b"] = b"a file where a tree was\n"
    b["data/app.db"] = _db(400, seed + 1)
    return b


def state_c(b: Spec, seed: int) -> Spec:
    """B with unsealed work on top: a new 4 MiB file, more edits, so the pre-rewind seal works."""
    rng = random.Random(seed + 2)
    c = dict(b)
    _edit_small(c, rng, 7, 3)
    c["assets/new.bin"] = noise(seed * 10 + 7, 4 * MiB)
    c["bin/run.sh"] = ("exec", b"#!/bin/sh\necho C\n")
    c["link"] = ("link", "deep")
    del c["deep/a/b"]
    c["deep/a/b/c/x.txt"] = b"x\n"
    return c


def state_d(a: Spec, seed: int) -> Spec:
    """A plus 16 MiB of new bytes, so a seal writes (and a kill tears) whole pack buffers."""
    rng = random.Random(seed + 3)
    d = dict(a)
    _edit_small(d, rng, 5, 1)
    d["assets/new0.bin"] = noise(seed * 10 + 8, 8 * MiB)
    d["assets/new1.bin"] = noise(seed * 10 + 9, 8 * MiB)
    d["bin/run.sh"] = ("exec", b"#!/bin/sh\necho D\n")
    return d


def file_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    assert value[0] == "exec", value
    return bytes(value[1])


def new_bytes(old: Spec, new: Spec) -> int:
    """Raw bytes of the files in `new` whose content `old` does not hold (all incompressible)."""
    known = {file_bytes(v) for v in old.values() if isinstance(v, bytes) or v[0] == "exec"}
    return sum(
        len(file_bytes(v))
        for v in new.values()
        if (isinstance(v, bytes) or v[0] == "exec") and file_bytes(v) not in known
    )


# -- scenarios ---------------------------------------------------------------------------------

# Rewind phases: (anchor failpoint, end of the window) the kill moment is drawn in; the anchor
# None means "from the process start". "anywhere" kills the real `python -m tillage`.
REWIND_PHASES: dict[str, tuple[str | None, str | None]] = {
    "anywhere": (None, None),
    "pre-seal": (None, "seal.after_publish"),
    "staging": ("seal.after_publish", "rewind.after_staging"),
    "intent": ("rewind.after_staging", "rewind.after_intent"),
    "apply": ("rewind.after_intent", "rewind.before_intent_removed"),
    "intent-removal": ("rewind.before_intent_removed", None),
}
# Killed seals: `snap` and `watch --no-daemon` anywhere (real process), a seal killed while
# writing its packs (after its first 8 MiB pack write), and one killed while publishing.
SEAL_PHASES: dict[str, tuple[str | None, str | None]] = {
    "snap": (None, None),
    "watch": (None, None),
    "writing": ("pack.after_write", "seal.before_publish"),
    "publishing": ("seal.before_publish", "seal.after_publish"),
}
# In round 0 each rewind phase meets two of these (i % 6) and each seal phase three (i % 4):
# `watch` and `verify` meet the apply phase, `verify` also a seal killed while writing.
NEXT_COMMANDS = (
    "status",
    "timeline",
    "show",
    "diff",
    "watch",
    "cat",
    "snap",
    "rewind-dry-run",
    "rewind-yes",
    "pin",
    "verify",
    "verify-repair",
)


@dataclass(frozen=True)
class Scenario:
    kind: str  # "rewind" or "seal"
    phase: str
    next: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.kind}-seed{self.seed}-{self.phase}-then-{self.next}"


def scenarios(kind: str, phases: list[str]) -> Iterator[Scenario]:
    """Every phase twice or thrice and every next command once per round; rounds shift pairs."""
    for r in range(ROUNDS):
        shift = (r * 5) % len(NEXT_COMMANDS)
        for i in range(len(NEXT_COMMANDS)):
            seed = BASE_SEED * 100_000 + r * 100 + i + (50 if kind == "seal" else 0)
            phase = phases[(i + r) % len(phases)]
            yield Scenario(kind, phase, NEXT_COMMANDS[(i + shift) % len(NEXT_COMMANDS)], seed)


# -- timing the phases once --------------------------------------------------------------------


@dataclass(frozen=True)
class Timings:
    """How long each phase lasts on this machine, in seconds: measured by one uninterrupted
    run, then shortened by any later run that finished before its kill."""

    rewind: dict[str, float]
    seal: dict[str, float]


def _windows(run: Killed, phases: dict[str, tuple[str | None, str | None]]) -> dict[str, float]:
    return {name: max(run.span(start, stop), 0.001) for name, (start, stop) in phases.items()}


@pytest.fixture(scope="module")
def timings(tmp_path_factory: pytest.TempPathFactory) -> Timings:
    """Runs one rewind and one seal of the campaign's workload to the end, marking phases."""
    base = tmp_path_factory.mktemp("timing")
    home = base / "home"
    folder = home / "project"
    folder.mkdir(parents=True)
    till = Till(base / "store", home, folder)
    a = state_a(0)
    b = state_b(a, 0)
    write_state(folder, a)
    target = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, b)
    till.json("snap")
    write_state(folder, state_c(b, 0))
    rewind = run_marked(till, ["--json", "rewind", target, "--yes"])
    assert rewind.returncode == 0, rewind
    write_state(folder, state_d(a, 0))
    seal = run_marked(till, ["--json", "snap"])
    assert seal.returncode == 0, seal
    return Timings(_windows(rewind, REWIND_PHASES), _windows(seal, SEAL_PHASES))


# -- what a user observes ------------------------------------------------------------------------


def clean_folder(found: Findings, folder: Path, home: Path, after: str) -> None:
    """No temporary file, staging folder or intent is left once `after` has run."""
    found.check(not temp_leftovers(folder), f"after {after}: temp files {temp_leftovers(folder)}")
    found.check(
        not staging_leftovers(folder), f"after {after}: staging left {staging_leftovers(folder)}"
    )
    found.check(not intent_files(home), f"after {after}: intent left {intent_files(home)}")


def cat_bytes(till: Till, snapshot: str, path: str) -> bytes | None:
    run = till("--json", "cat", snapshot, path)
    if run.code != 0:
        return None
    return base64.b64decode(run.doc["content_base64"])


def published_are_kept(
    found: Findings, till: Till, published: list[str], readable: dict[str, tuple[str, bytes]]
) -> None:
    """Every snapshot published by the time of the kill is listed, readable, and verifies."""
    run = till("--json", "timeline", "-n", "100000")
    doc = answered(found, run, "timeline (after)")
    listed = {s["id"] for s in doc["snapshots"]} if doc else set()
    lost = [s for s in published if s not in listed]
    found.check(not lost, f"published snapshots missing from `till timeline`: {lost}")
    for snapshot in published:
        path, want = readable.get(snapshot, ("bin/run.sh", b""))
        got = cat_bytes(till, snapshot, path)
        found.check(got is not None, f"`till cat {snapshot[:12]} {path}` failed")
        if want and got is not None:
            found.check(got == want, f"`till cat {snapshot[:12]} {path}` gave other bytes")
    verify = till("--json", "verify")
    doc = answered(found, verify, "verify (after)")
    if doc is not None:
        found.check(
            doc.get("ok") is True,
            f"`till verify` after the next command: ok={doc.get('ok')} "
            f"problems={json.dumps(doc.get('problems'))[:400]}",
        )


def next_args(next_command: str, ids: dict[str, str]) -> list[str]:
    """The next command's arguments; `rewind-yes` and `rewind-dry-run` aim at ids['next']."""
    return {
        "status": ["status"],
        "timeline": ["timeline", "-n", "100000"],
        "show": ["show", ids["A"]],
        "diff": ["diff", ids["A"]],
        "cat": ["cat", ids["A"], "bin/run.sh"],
        "snap": ["snap", "-m", "next"],
        "watch": ["watch", "--no-daemon"],
        "rewind-dry-run": ["rewind", ids["next"], "--dry-run"],
        "rewind-yes": ["rewind", ids["next"], "--yes"],
        "pin": ["pin", ids["A"]],
        "verify": ["verify"],
        "verify-repair": ["verify", "--repair"],
    }[next_command]


def check_result(found: Findings, next_command: str, doc: dict[str, Any], a: Spec) -> None:
    """The next command's own answer says what it should."""
    if next_command in ("verify", "verify-repair"):
        found.check(
            doc.get("ok") is True,
            f"`till {next_command}` answered ok={doc.get('ok')} "
            f"problems={json.dumps(doc.get('problems'))[:400]}",
        )
    elif next_command == "cat":
        got = base64.b64decode(doc.get("content_base64", ""))
        found.check(got == file_bytes(a["bin/run.sh"]), "`till cat` gave other bytes")
    elif next_command == "rewind-yes":
        found.check(doc.get("applied") is True, f"`till rewind --yes` answered {doc}")
    elif next_command == "rewind-dry-run":
        found.check(doc.get("applied") is False, f"`till rewind --dry-run` answered {doc}")


# -- the campaign --------------------------------------------------------------------------------


def _kill(
    till: Till,
    args: list[str],
    phases: dict[str, tuple[str | None, str | None]],
    phase: str,
    windows: dict[str, float],
    rng: random.Random,
) -> Killed:
    """Kills `till ARGS` at a moment drawn in [0, the phase's measured length] after its anchor.

    A run the kill missed (it finished first) measured every phase again: the shorter length is
    kept, so a slow timing run does not push later kills past the end of their phase.
    """
    anchor = phases[phase][0]
    real = anchor is None and phases[phase][1] is None  # the whole command: the real process
    delay = rng.uniform(0, windows[phase])
    killed = run_marked(till, ["--json", *args], anchor=anchor, kill_after=delay, marked=not real)
    if killed.returncode == 0 and not real:
        for name, length in _windows(killed, phases).items():
            if length > 0.001:
                windows[name] = min(windows[name], length)
    return killed


def _rewind_landing(killed: Killed, home: Path, before: list[str]) -> str:
    if killed.returncode == 0:
        return "after the rewind finished"
    if killed.returncode != -9:
        return f"nowhere: exit {killed.returncode}"
    order = ["rewind.before_intent_removed", "rewind.after_intent", "rewind.after_staging"]
    for mark in order:
        if killed.passed(mark):
            return f"after {mark}"
    if killed.passed("seal.after_publish"):
        return "staging"
    if intent_files(home):
        return "apply (intent present)"
    if len(published_snapshots(home)) > len(before):
        return "after the pre-rewind seal"
    return "in start-up or the pre-rewind seal"


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario", [pytest.param(s, id=s.id) for s in scenarios("rewind", list(REWIND_PHASES))]
)
def test_a_rewind_killed_at_a_random_moment_leaves_a_folder_any_next_command_finishes(
    till: Till, folder: Path, timings: Timings, scenario: Scenario
) -> None:
    """Live C, sealed A and B; a rewind to A is killed; then one command of any kind runs."""
    rng = random.Random(scenario.seed)
    a = state_a(scenario.seed)
    b = state_b(a, scenario.seed)
    c = state_c(b, scenario.seed)
    write_state(folder, a)
    state_a_m = manifest(folder)
    sa = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, b)
    state_b_m = manifest(folder)
    sb = till.json("snap", "-m", "B")["snapshot"]["id"]
    write_state(folder, c)
    state_c_m = manifest(folder)
    before = published_snapshots(till.home)
    found = Findings(scenario.id)

    killed = _kill(
        till, ["rewind", sa, "--yes"], REWIND_PHASES, scenario.phase, timings.rewind, rng
    )
    found.landed = _rewind_landing(killed, till.home, before)
    found.check(
        killed.returncode in (0, -9), f"the rewind ended {killed.returncode}: {killed.stderr}"
    )
    after_kill = published_snapshots(till.home)
    found.check(after_kill[: len(before)] == before, "the kill lost published log lines")
    interrupted = bool(intent_files(till.home))
    states = {"pre-rewind": state_c_m, "target": state_a_m}
    at_kill = folder_state(folder, states)
    found.landed += f", folder {at_kill}, intent {'present' if interrupted else 'absent'}"
    if interrupted:
        expected = "target"  # INV-7: an interrupted rewind is rolled forward
    else:
        # Without an intent the rewind had not begun to change the folder, or had finished.
        found.check(at_kill in states, "the kill left no intent but a half-rewound folder")
        expected = at_kill if at_kill in states else "pre-rewind"

    ids = {"A": sa, "B": sb, "next": sb}
    run = till("--json", *next_args(scenario.next, ids))
    doc = answered(found, run, scenario.next)
    if doc is not None:
        check_result(found, scenario.next, doc, a)
    if scenario.next == "rewind-yes" and doc is not None:
        # The next rewind first finished (or rolled back) the interrupted one: its undo holds
        # that state, and the folder is now B.
        now = folder_state(folder, {"B": state_b_m})
        found.check(now == "B", f"after `till rewind {sb[:12]} --yes` the folder is {now}")
        clean_folder(found, folder, till.home, "rewind --yes")
        till.json("rewind", str(doc["undo"]), "--yes")
        undo_state = folder_state(folder, states)
        found.check(
            undo_state == expected,
            f"the undo of the next rewind holds the {undo_state} state, not the {expected} "
            f"state (after the kill: {found.landed})",
        )
    else:
        now = folder_state(folder, states)
        found.check(
            now == expected,
            f"after `till {scenario.next}` the folder is {now}, not the {expected} state "
            f"(after the kill: {found.landed}): " + describe_difference(folder, states[expected]),
        )
        clean_folder(found, folder, till.home, f"`till {scenario.next}`")

    readable = {
        sa: ("assets/blob1.bin", a["assets/blob1.bin"]),
        sb: ("bin/run.sh", file_bytes(b["bin/run.sh"])),
    }
    for snapshot in after_kill[len(before) :]:
        readable[snapshot] = ("bin/run.sh", file_bytes(c["bin/run.sh"]))  # the killed one's undo
    published_are_kept(found, till, after_kill, readable)
    found.done()


def _seal_landing(killed: Killed, home: Path, before: list[str]) -> str:
    if killed.returncode == 0:
        return "after the seal finished"
    if killed.returncode != -9:
        return f"nowhere: exit {killed.returncode}"
    if len(published_snapshots(home)) > len(before):
        return "after publication"
    if killed.passed("seal.before_publish"):
        return "publishing"
    if killed.passed("pack.after_write"):
        return "writing (a pack buffer written)"
    return "start-up or capture" if killed.marks else "before publication"


def torn_bytes(home: Path) -> int:
    """Bytes of the store's packs that are not whole records: what a kill mid-write leaves."""
    return sum(stop - start for pack in packs(home) for start, stop in scan_pack(pack).damaged)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario", [pytest.param(s, id=s.id) for s in scenarios("seal", list(SEAL_PHASES))]
)
def test_a_seal_killed_at_a_random_moment_loses_nothing_and_its_bytes_are_given_back(
    till: Till, folder: Path, timings: Timings, scenario: Scenario
) -> None:
    """Sealed A, live D (16 MiB new): two seals of D are killed, then one command of any kind."""
    rng = random.Random(scenario.seed)
    a = state_a(scenario.seed)
    d = state_d(a, scenario.seed)
    write_state(folder, a)
    state_a_m = manifest(folder)
    sa = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, d)
    state_d_m = manifest(folder)
    before = published_snapshots(till.home)
    store_before = pack_bytes(till.home)
    found = Findings(scenario.id)

    args = ["watch", "--no-daemon"] if scenario.phase == "watch" else ["snap", "-m", "killed"]
    landings = []
    for _ in range(2):
        killed = _kill(till, args, SEAL_PHASES, scenario.phase, timings.seal, rng)
        landings.append(_seal_landing(killed, till.home, before))
        found.check(
            killed.returncode in (0, -9), f"the seal ended {killed.returncode}: {killed.stderr}"
        )
    after_kill = published_snapshots(till.home)
    found.check(after_kill[: len(before)] == before, "the kill lost published log lines")
    leaked = pack_bytes(till.home) - store_before
    found.landed = (
        f"{' / '.join(landings)}; {leaked / MiB:.1f} MiB written by the killed seals, "
        f"{torn_bytes(till.home)} bytes torn"
    )

    ids = {"A": sa, "next": sa}
    run = till("--json", *next_args(scenario.next, ids))
    doc = answered(found, run, scenario.next)
    if doc is not None:
        check_result(found, scenario.next, doc, a)
    expected = "A" if scenario.next == "rewind-yes" and doc is not None else "D"
    now = folder_state(folder, {"A": state_a_m, "D": state_d_m})
    found.check(now == expected, f"after `till {scenario.next}` the folder is {now}")
    clean_folder(found, folder, till.home, f"`till {scenario.next}`")

    readable = {sa: ("assets/blob1.bin", a["assets/blob1.bin"])}
    for snapshot in after_kill[len(before) :]:
        readable[snapshot] = ("bin/run.sh", file_bytes(d["bin/run.sh"]))
    published_are_kept(found, till, after_kill, readable)

    # A seal that completes and a repair give back what the killed seals wrote: the store holds
    # D's new bytes once, not once more per killed seal (issue 6, item 11).
    write_state(folder, d)
    till.json("snap", "-m", "after the kills")
    repair = till("--json", "verify", "--repair")
    doc = answered(found, repair, "verify --repair (after)")
    if doc is not None:
        found.check(doc.get("ok") is True, f"`till verify --repair` answered ok={doc.get('ok')}")
    grown = pack_bytes(till.home) - store_before
    allowed = new_bytes(a, d) * 1.02 + 1 * MiB
    found.check(
        grown <= allowed,
        f"the store grew by {grown / MiB:.1f} MiB for {new_bytes(a, d) / MiB:.1f} MiB of new "
        f"bytes: the killed seals' {leaked / MiB:.1f} MiB were not given back",
    )
    found.done()


# -- reclaiming killed seals' packs never takes a live seal's -----------------------------------

# Runs `till` (argv[3:]) with 4 MiB packs, as a seal of more than 256 MiB rotates its packs, and
# stops at the second pack's fsync -- the first pack is closed but its objects are not indexed
# yet -- reporting on the pipe argv[1] and waiting for a byte on the pipe argv[2].
ROTATING_SEAL_SCRIPT = (
    "import os, sys\n"
    "import tillage.store.writer as writer\n"
    "writer.PACK_TARGET_BYTES = 4 << 20\n"
    "from tillage.platform import failpoints\n"
    "fsyncs = []\n"
    "def pause():\n"
    "    fsyncs.append(1)\n"
    "    if len(fsyncs) == 2:\n"
    "        os.write(int(sys.argv[1]), b'between packs\\n')\n"
    "        os.read(int(sys.argv[2]), 1)\n"
    "failpoints.arm('pack.after_fsync', pause)\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)


def test_a_verify_while_a_seal_rotates_its_packs_does_not_reclaim_the_seals_first_pack(
    till: Till, folder: Path
) -> None:
    """`verify` reclaims packs nobody indexes and no writer holds; a seal closes a full pack
    before its objects are indexed, so that pack must not look abandoned."""
    (folder / "a.txt").write_bytes(b"a\n")
    till.json("watch", "--no-daemon")
    big = noise(77, 12 * MiB)
    (folder / "big.bin").write_bytes(big)
    report_r, report_w = os.pipe()
    ack_r, ack_w = os.pipe()
    seal = subprocess.Popen(
        [sys.executable, "-c", ROTATING_SEAL_SCRIPT, str(report_w), str(ack_r), "--json", "snap"],
        cwd=folder,
        env=till.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(report_w, ack_r),
    )
    os.close(report_w)
    os.close(ack_r)
    try:
        paused = os.read(report_r, 100) == b"between packs\n"
        during = till.json("verify") if paused else {}
    finally:
        os.close(ack_w)  # the seal goes on
        os.close(report_r)
        out, err = seal.communicate(timeout=120)
    assert paused and seal.returncode == 0, (out, err)
    snapshot = json.loads(out)["snapshot"]["id"]

    assert during["ok"] is True
    after = till("--json", "verify")
    assert after.code == 0 and after.doc["ok"] is True, after.stdout[:600]
    assert cat_bytes(till, snapshot, "big.bin") == big
