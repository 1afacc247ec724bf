"""Sync under faults, through real `till` processes: a push killed half-way, a pull killed while
it applies, two machines racing to push one ref, leases left behind and taken over."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.harness import (
    REWIND_FAILPOINTS,
    assert_crashed,
    crash,
    intent_files,
    manifest,
    verify_store,
)
from tests.sync.conftest import Machine, Site
from tillage.crypto import RecoveryKey, name_of, open_document, seal_document
from tillage.features.sync.repository import open_repository

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

Machines = Callable[[Site], tuple[Machine, Machine]]
KILL_TIMEOUT = 60.0


def started(a: Machine, b: Machine, site: Site, folder: Path) -> tuple[str, str, Path]:
    """A pushes a small workspace, B clones it. Returns (key, the pushed snapshot, B's copy)."""
    (folder / "notes.txt").write_text("one\n")
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("print('a')\n")
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", site.url)["key"]
    first = a.json("sync", "--push")["snapshot"]["id"]
    b.json("clone", site.url, "b", "--key", key)
    return key, first, b.cwd / "b"


def pack_sizes(root: Path) -> dict[str, int]:
    """The packs a directory remote holds (its dot-named temporaries aside), and their sizes."""
    packs = root / "packs"
    if not packs.is_dir():
        return {}
    return {
        entry.name: entry.stat().st_size
        for entry in os.scandir(packs)
        if not entry.name.startswith(".")
    }


def count_packs(root: Path) -> int:
    return len(pack_sizes(root))


def test_a_push_killed_half_way_leaves_the_ref_and_the_next_push_sends_the_rest(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, first, copy = started(a, b, dir_site, folder)
    root = Path(dir_site.url)
    big = folder / "big"
    big.mkdir()
    rng = random.Random(11)
    for i in range(300):  # 30 MiB of incompressible files: hundreds of objects to send
        (big / f"{i:03d}.bin").write_bytes(rng.randbytes(100 << 10))
    a.json("snap")  # sealed here first: the push below goes straight to uploading
    before = count_packs(root)
    old_packs = set(pack_sizes(root))
    indexes = sorted(os.listdir(root / "index"))

    with tempfile.TemporaryFile() as out:
        push = subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "sync", "--push"],
            cwd=folder,
            env=a.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + KILL_TIMEOUT
        while push.poll() is None and time.monotonic() < deadline:
            if count_packs(root) - before >= 1:  # one of the push's two packs is there
                push.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        push.wait(timeout=30)
        out.seek(0)
        said = out.read().decode(errors="replace")
    assert push.returncode == -signal.SIGKILL, f"the push was not killed half-way: {said}"
    landed = count_packs(root)
    assert landed - before >= 1
    # Either of the two packs may be the one that landed: they are put on threads of their own.
    landed_bytes = sum(size for name, size in pack_sizes(root).items() if name not in old_packs)
    assert sorted(os.listdir(root / "index")) == indexes  # killed before its index

    # The ref did not move: the other machine finds nothing new.
    pulled = b.json("sync", "--pull", cwd=copy)
    assert pulled["disposition"] == "up_to_date" and pulled["remote_snapshot"] == first
    # The dead push's lease is live: another machine cannot push, even with --takeover.
    for extra in ((), ("--takeover", "--yes")):
        run = b("--json", "sync", "--push", *extra, cwd=copy)
        assert run.code == 1 and run.error["name"] == "sync.lease_held", run.stdout

    # The same machine renews its own lease and sends only what is missing: the pack the dead
    # push left, named by no index, is adopted by its own header, not sent again.
    done = a.json("sync", "--push")
    assert done["reused_objects"] >= 100  # the ~160 files of the pack that landed
    # Not the 30 MiB again: the files the dead push sent are not sent twice.
    assert landed_bytes >= 8 << 20
    assert done["uploaded_bytes"] + landed_bytes < 31 << 20, (done, landed_bytes)
    forward = b.json("sync", "--pull", cwd=copy)
    assert forward["disposition"] == "fast_forwarded"
    assert forward["remote_snapshot"] == done["snapshot"]["id"]
    assert manifest(copy) == manifest(folder)


@pytest.mark.parametrize("failpoint", REWIND_FAILPOINTS)
def test_a_pull_killed_while_applying_is_finished_by_the_next_command(
    dir_site: Site, machines: Machines, folder: Path, failpoint: str
) -> None:
    a, b = machines(dir_site)
    _key, _first, copy = started(a, b, dir_site, folder)
    (folder / "notes.txt").write_text("two\n")
    (folder / "src" / "app.py").write_text("print('b')\n")
    (folder / "src" / "new.py").write_text("X = 1\n")
    (folder / "more").mkdir()
    (folder / "more" / "data.bin").write_bytes(random.Random(5).randbytes(200 << 10))
    second = a.json("sync", "--push")["snapshot"]["id"]
    on_b = Machine(b.home, b.user_home, copy, b.extra)

    killed = crash(on_b, failpoint, "kill", "--json", "sync", "--pull")
    assert_crashed(killed, failpoint, "kill")
    assert len(intent_files(b.home)) == 1

    on_b.json("status")  # the next command finishes the fast-forward
    assert intent_files(b.home) == []
    assert manifest(copy) == manifest(folder)
    pulled = on_b("--json", "sync", "--pull")
    assert pulled.code == 0, (pulled.code, pulled.stdout)
    assert pulled.doc["disposition"] in ("fast_forwarded", "up_to_date")
    assert pulled.doc["remote_snapshot"] == second
    assert manifest(copy) == manifest(folder)
    assert on_b.json("sync", "--pull")["disposition"] == "up_to_date"

    # And the two machines go on as before: B's next edit reaches A by a fast-forward.
    (copy / "notes.txt").write_text("three, from b\n")
    on_b.json("sync", "--push")
    assert a.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert manifest(folder) == manifest(copy)


# A pull's own steps (after its download; after its decision, before the landing), and
# merge.after_seal: between the landing's completion seal (the pull's twin) and its fact.
PULL_FAILPOINTS = ("sync.pull.fetched", "sync.pull.decided")


@pytest.mark.parametrize("failpoint", (*PULL_FAILPOINTS, *REWIND_FAILPOINTS, "merge.after_seal"))
def test_a_killed_pull_finished_by_the_next_command_is_recorded_as_landed(
    dir_site: Site, machines: Machines, folder: Path, failpoint: str
) -> None:
    """The sync fact is part of the journaled pull: finished by another command, the pull
    still counts as landed, so a newer push from the other side fast-forwards here."""
    a, b = machines(dir_site)
    _key, _first, copy = started(a, b, dir_site, folder)
    (folder / "notes.txt").write_text("two\n")
    (folder / "src" / "new.py").write_text("X = 1\n")
    a.json("sync", "--push")
    on_b = Machine(b.home, b.user_home, copy, b.extra)
    killed = crash(on_b, failpoint, "kill", "--json", "sync", "--pull")
    assert_crashed(killed, failpoint, "kill")

    on_b.json("status")  # finishes the pull's landing
    assert intent_files(b.home) == []
    (folder / "notes.txt").write_text("three, from a\n")
    third = a.json("sync", "--push")["snapshot"]["id"]  # before B pulls again
    pulled = on_b("--json", "sync", "--pull")
    assert pulled.code == 0, (pulled.code, pulled.stdout)
    assert pulled.doc["disposition"] == "fast_forwarded"
    assert pulled.doc["remote_snapshot"] == third
    assert manifest(copy) == manifest(folder)
    verify_store(on_b)


@pytest.mark.parametrize("kind", ["dir", "ssh", "s3"])
def test_two_machines_racing_to_push_one_ref_land_exactly_one(
    kind: str, request: pytest.FixtureRequest, machines: Machines, folder: Path
) -> None:
    site: Site = request.getfixturevalue(f"{kind}_site")
    a, b = machines(site)
    key, _first, copy = started(a, b, site, folder)
    on_b = Machine(b.home, b.user_home, copy, b.extra)
    (folder / "notes.txt").write_text("a's work\n")
    (copy / "notes.txt").write_text("b's work\n")
    (copy / "src" / "b-only.py").write_text("B = 1\n")
    sealed = {"a": a.json("snap")["snapshot"]["id"], "b": on_b.json("snap")["snapshot"]["id"]}

    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "sync", "--push"],
            cwd=m.cwd,
            env=m.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, m in (("a", a), ("b", on_b))
    }
    ends = {name: proc.communicate(timeout=120) for name, proc in procs.items()}
    codes = {name: proc.returncode for name, proc in procs.items()}
    assert sorted(codes.values()) == [0, 1], (codes, ends)
    winner = next(name for name, code in codes.items() if code == 0)
    loser = "b" if winner == "a" else "a"
    error = json.loads(ends[loser][0])["error"]
    assert error["name"] in ("sync.pull_first", "sync.lease_held"), error
    landed = json.loads(ends[winner][0])["snapshot"]["id"]
    assert landed == sealed[winner]

    # The remote's head is the winner's snapshot, whole: a third machine clones it exactly.
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    cloned = third.json("clone", site.url, "c", "--key", key)
    assert manifest(b.cwd / "c") == manifest(a.cwd if winner == "a" else copy)
    assert cloned["head"]["merged_from"] == landed
    behind = (on_b if loser == "b" else a)("--json", "sync", "--pull")
    assert behind.code == 3 and behind.doc["remote_snapshot"] == landed


# -- leases --------------------------------------------------------------------------------------


def leave_lease(site: Site, key: str, holder: str, expires_in_s: float, ref: str = "main") -> None:
    """Writes the ref's lease as a push of `holder` that never finished leaves it, expiring
    `expires_in_s` from now (negative: expired): made here rather than waited for (the TTL is
    ten minutes unless TILLAGE_SYNC_LEASE_SECONDS says otherwise)."""
    master = open_repository(site.open(), RecoveryKey.from_hex(key)).key_for_documents
    name = name_of(master, "lease", ref)
    doc = {"ref": ref, "holder": holder, "expires_ns": time.time_ns() + int(expires_in_s * 1e9)}
    site.open().put(name, seal_document(master, name, doc))


def test_a_lease_blocks_other_machines_until_it_expires_and_takeover_never_takes_newer_work(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    key, _first, copy = started(a, b, dir_site, folder)
    on_b = Machine(b.home, b.user_home, copy, b.extra)

    def leases() -> list[str]:
        """The leases held now: a released one stays as a `released` document (a release is a
        compare-and-swap, never a delete that could remove another machine's takeover)."""
        remote = dir_site.open()
        recovery = open_repository(remote, RecoveryKey.from_hex(key)).key_for_documents
        held = []
        for name in remote.list("leases/"):
            if not open_document(recovery, name, remote.get(name)).get("released"):
                held.append(name)
        return held

    # A live lease of another machine: busy, even with --takeover; a pull is not blocked.
    leave_lease(dir_site, key, "a-machine-pushing-now", 600)
    (folder / "notes.txt").write_text("two, from a\n")
    for extra in ((), ("--takeover", "--yes")):
        run = a("--json", "sync", "--push", *extra)
        assert run.code == 1 and run.error["name"] == "sync.lease_held", run.stdout
    assert on_b.json("sync", "--pull")["disposition"] == "up_to_date"
    # Leases are per ref: another named ref of the same remote is free.
    other = a.json("sync", "--push", "--ref", "other")["snapshot"]["id"]
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    cloned = third.json("clone", dir_site.url, "c", "--key", key, "--ref", "other")
    assert cloned["head"]["merged_from"] == other
    assert manifest(b.cwd / "c") == manifest(folder)

    # A lease of this same machine (its own push died) is renewed: the push lands.
    own = (a.home / "remotes" / "machine-id").read_text().strip()
    leave_lease(dir_site, key, own, 600)
    second = a.json("sync", "--push")["snapshot"]["id"]
    assert leases() == []  # released once the ref moved

    # An expired lease of a machine that died: told apart from a live one, and taken over
    # only on request -- never over work this machine has not pulled.
    leave_lease(dir_site, key, "a-machine-that-died", -1)
    (copy / "src" / "b.py").write_text("B = 2\n")
    run = on_b("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.lease_expired", run.stdout
    assert "--takeover" in run.error["next"]
    run = on_b("--json", "sync", "--push", "--takeover", "--yes")
    assert run.code == 1 and run.error["name"] == "sync.pull_first", run.stdout
    assert a.json("sync", "--pull")["disposition"] == "up_to_date"  # the ref did not move

    diverged = on_b("--json", "sync", "--pull")
    assert diverged.code == 3 and diverged.doc["remote_snapshot"] == second
    on_b.json("merge", "--snapshot", second)
    leave_lease(dir_site, key, "a-machine-that-died", -1)
    run = on_b("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.lease_expired", run.stdout
    took = on_b.json("sync", "--push", "--takeover", "--yes")
    assert leases() == []
    pulled = a.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded"
    assert pulled["remote_snapshot"] == took["snapshot"]["id"]
    assert manifest(folder) == manifest(copy)
    assert (folder / "src" / "b.py").read_text() == "B = 2\n"


# -- the order objects go up in -----------------------------------------------------------------

# Runs the real command line, SIGKILLed right after its Nth pack went to (put) or came from
# (get) a directory remote: argv is METHOD N till-args... (a transfer cut at an exact pack, as
# a kill or a dropped link cuts it).
KILL_AFTER_OBJECTS = (
    "import os, signal, sys\n"
    "from tillage.remote import directory\n"
    "method, left = sys.argv[1], [int(sys.argv[2])]\n"
    "plain = getattr(directory.DirectoryRemote, method)\n"
    "def counted(self, name, *args):\n"
    "    out = plain(self, name, *args)\n"
    "    if name.startswith('packs/'):\n"
    "        left[0] -= 1\n"
    "        if left[0] == 0:\n"
    "            os.kill(os.getpid(), signal.SIGKILL)\n"
    "    return out\n"
    "setattr(directory.DirectoryRemote, method, counted)\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)


def cut(machine: Machine, method: str, after: int, *args: str) -> None:
    """Runs `till ARGS` on `machine`, killed after its `after`th pack `method` (put or get)."""
    done = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_OBJECTS, method, str(after), *args],
        cwd=machine.cwd,
        env=machine.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)


def test_a_push_cut_after_any_object_never_leaves_a_tree_without_its_contents(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    key, _first, _copy = started(a, b, dir_site, folder)
    # The same bytes straight under the root and inside a new folder: the walk meets them as
    # the root's child, at the same depth as the folder's tree.
    same = b"the same bytes in two places\n"
    (folder / "a-copy.txt").write_bytes(same)
    (folder / "d").mkdir()
    (folder / "d" / "b.txt").write_bytes(same)
    a.json("snap")
    cut(a, "put", 1, "--json", "sync", "--push")

    (folder / "a-copy.txt").unlink()  # now the folder's tree alone holds those bytes
    a.json("sync", "--push")
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    cloned = third("--json", "clone", dir_site.url, "c", "--key", key)
    assert cloned.code == 0, cloned.stdout
    assert manifest(b.cwd / "c") == manifest(folder)


def test_a_push_killed_after_its_ref_moved_is_known_to_its_machine(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, _first, copy = started(a, b, dir_site, folder)
    (folder / "notes.txt").write_text("two\n")
    head = a.json("snap")["snapshot"]["id"]  # sealed: the push's next publication is its fact
    killed = crash(a, "publog.before_append", "kill", "--json", "sync", "--push")
    assert_crashed(killed, "publog.before_append", "kill")
    pulled = Machine(b.home, b.user_home, copy, b.extra).json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == head

    # The ref moved to this machine's own head, though it died before noting so.
    mine = a("--json", "sync", "--pull")
    assert mine.code == 0, mine.stdout
    assert mine.doc["disposition"] == "up_to_date" and mine.doc["remote_snapshot"] == head
    assert manifest(folder) == manifest(copy)


def test_a_pull_cut_while_fetching_writes_nothing_and_the_next_pull_lands(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, _first, copy = started(a, b, dir_site, folder)
    on_b = Machine(b.home, b.user_home, copy, b.extra)
    for i in range(8):  # enough that the pull has written packs when it dies
        (folder / f"fresh-{i}.bin").write_bytes(random.Random(i).randbytes(1 << 20))
    pushed = a.json("sync", "--push")
    before = manifest(copy)
    timeline = on_b.json("timeline")["snapshots"]

    assert pushed["uploaded_objects"] > 8
    cut(on_b, "get", 1, "--json", "sync", "--pull")  # its one pack fetched, not yet written
    assert manifest(copy) == before
    assert on_b.json("timeline")["snapshots"] == timeline
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded"
    assert manifest(copy) == manifest(folder)
    assert verify_store(on_b)["ok"] is True


def test_a_remote_restored_from_an_older_backup_gets_the_newer_work_back(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, first, copy = started(a, b, dir_site, folder)
    root = Path(dir_site.url)
    backup = files_below_remote(root)
    (folder / "notes.txt").write_text("two, after the backup\n")
    a.json("sync", "--push")
    newer = manifest(folder)
    for path in files_below_remote(root):  # the remote's folder restored from the backup
        if path not in backup:
            path.unlink()
    for path, data in backup.items():
        path.write_bytes(data)

    # This machine saw a newer head: the older one is refused, until the person accepts it.
    refused = a("--json", "sync", "--pull")
    assert refused.code == 1 and refused.error["name"] == "sync.rollback", refused.stdout
    # As --follow does, pull then push: the pull takes nothing back from the older head...
    pulled = a("--json", "sync", "--pull", "--accept-rollback")
    assert pulled.code == 0, pulled.stdout
    assert pulled.doc["remote_snapshot"] == first
    assert manifest(folder) == newer
    # ...and the push puts the newer work back for the other machines.
    pushed = a.json("sync", "--push")
    assert pushed["uploaded_objects"] >= 1
    on_b = Machine(b.home, b.user_home, copy, b.extra)
    assert on_b.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert manifest(copy) == newer


def files_below_remote(root: Path) -> dict[Path, bytes]:
    """Every file of a directory remote (its lock files too), by path."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_clone_killed_while_fetching_leaves_no_folder_and_the_clone_again_works(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    key, _first, _copy = started(a, b, dir_site, folder)
    (folder / "data.bin").write_bytes(random.Random(9).randbytes(3 << 20))
    a.json("sync", "--push")
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    cut(third, "get", 1, "--json", "clone", dir_site.url, "c", "--key", key)
    assert not (b.cwd / "c").exists()
    third.json("clone", dir_site.url, "c", "--key", key)
    assert manifest(b.cwd / "c") == manifest(folder)
