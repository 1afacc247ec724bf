"""Refs you can trust, through `till` as two machines run it: a damaged lease or ref never
blocks for good (a takeover, a repair from a machine that saw the ref), a ref's history has no
horizon (more pushes than a head remembers still fast-forward), a remote put back to an older
ref or stripped of one is refused rather than believed (until the person accepts it), and
`till remote refs` lists what the remote holds."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.harness import manifest
from tests.sync.conftest import Machine, Site
from tillage.crypto import MasterKey, RecoveryKey, open_document
from tillage.features.sync.repository import open_repository
from tillage.remote.base import Remote

pytestmark = pytest.mark.process  # real servers (sshd, moto)

Machines = Callable[[Site], tuple[Machine, Machine]]


def documents_key(remote: Remote, key: str) -> MasterKey:
    """What refs and leases are sealed under: the master key the recovery key opens."""
    return open_repository(remote, RecoveryKey.from_hex(key)).key_for_documents


def started(a: Machine, b: Machine, site: Site, folder: Path) -> tuple[str, str, Machine]:
    """A pushes a small workspace, B clones it. Returns (key, the pushed snapshot, B in its
    copy)."""
    (folder / "notes.txt").write_text("one\n")
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", site.url)["key"]
    first = a.json("sync", "--push")["snapshot"]["id"]
    b.json("clone", site.url, "b", "--key", key)
    return key, first, Machine(b.home, b.user_home, b.cwd / "b", b.extra)


def everything(site: Site) -> dict[str, bytes]:
    """What the remote holds, name by name, through its transport."""
    remote = site.open()
    return {name: remote.get(name) for name in remote.list("")}


def bound_history(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    """Lowers how many heads a ref document holds itself (`till` runs in this process). Also
    the engine's constant of the code before refs.py, where it was the whole history."""
    for module in ("tillage.features.sync.refs", "tillage.features.sync.engine"):
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(found, "HISTORY"):
            monkeypatch.setattr(found, "HISTORY", bound)


# -- a damaged lease, a damaged ref ---------------------------------------------------------------


def test_a_damaged_lease_blocks_a_plain_push_and_a_confirmed_takeover_takes_it(
    site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(site)
    key, _first, on_b = started(a, b, site, folder)
    remote = site.open()
    (lease,) = remote.list("leases/")
    remote.put(lease, remote.get(lease)[:40])  # `head -c 40 L > L`
    (folder / "notes.txt").write_text("two\n")

    run = a("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.lease_damaged", run.stdout
    assert "damaged" in run.error["message"] and "--takeover" in run.error["next"]
    assert on_b.json("sync", "--pull")["disposition"] == "up_to_date"  # a pull is not blocked
    # A takeover is destructive (CONTRACT): without --yes it changes nothing.
    run = a("--json", "sync", "--push", "--takeover")
    assert run.code == 1 and run.error["name"] == "confirmation_required", run.stdout
    assert "--yes" in run.error["next"]
    assert len(remote.get(lease)) == 40  # the damaged lease is still there

    took = a.json("sync", "--push", "--takeover", "--yes")
    held = open_document(documents_key(remote, key), lease, remote.get(lease))
    assert held["released"] is True  # taken, then released once the ref moved
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded"
    assert pulled["remote_snapshot"] == took["snapshot"]["id"]
    assert manifest(on_b.cwd) == manifest(folder)


def test_a_damaged_ref_names_its_repair_and_the_repair_from_its_pusher_lets_b_pull(
    site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(site)
    key, first, on_b = started(a, b, site, folder)
    (folder / "notes.txt").write_text("two\n")
    second = a.json("sync", "--push")["snapshot"]["id"]  # B has not pulled it
    remote = site.open()
    (ref_name,) = remote.list("refs/")
    whole = remote.get(ref_name)
    remote.put(ref_name, whole[: len(whole) // 2])

    for machine in (on_b, a):
        run = machine("--json", "sync", "--pull" if machine is on_b else "--push")
        assert run.code == 1 and run.error["name"] == "integrity", run.stdout
        assert "till remote repair-ref --ref main" in run.error["next"], run.error
    listed = a.json("remote", "refs")["refs"]
    assert [(r["ref"], r["problem"], r["snapshot"]) for r in listed] == [("main", "damaged", None)]
    # A machine that never saw the ref has nothing to rebuild it from.
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    (b.cwd / "c").mkdir()
    third.json("watch", "--no-daemon", cwd=b.cwd / "c")
    third.json("remote", "add", site.url, "--key", key, cwd=b.cwd / "c")
    run = third("--json", "remote", "repair-ref", cwd=b.cwd / "c")
    assert run.code == 1 and run.error["name"] == "sync.ref_missing", run.stdout
    assert remote.get(ref_name) == whole[: len(whole) // 2]

    # A pushed it: its memory has the head, its history and its version.
    fixed = a.json("remote", "repair-ref")
    assert fixed == {
        "ref": "main",
        "remote": "origin",
        "repaired": True,
        "problem": "damaged",
        "snapshot": second,
        "version": 3,
    }
    again = a.json("remote", "repair-ref")
    assert again["repaired"] is False and again["problem"] is None and again["version"] == 3
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == second
    assert manifest(on_b.cwd) == manifest(folder)
    assert first != second


# -- a history without a horizon ------------------------------------------------------------------


def test_more_pushes_than_a_ref_document_holds_still_fast_forward_the_machine_away(
    site: Site, machines: Machines, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound_history(monkeypatch, 4)
    a, b = machines(site)
    _key, first, on_b = started(a, b, site, folder)
    pushed = []
    for i in range(11):  # B is away for all of them
        (folder / f"step-{i}.txt").write_text(f"{i}\n")
        pushed.append(a.json("sync", "--push")["snapshot"]["id"])
    pulled = on_b("--json", "sync", "--pull")
    assert pulled.code == 0 and pulled.doc["disposition"] == "fast_forwarded", pulled.stdout
    assert pulled.doc["remote_snapshot"] == pushed[-1]
    assert manifest(on_b.cwd) == manifest(folder)
    assert len(site.open().list("history/")) >= 3  # the older heads, sealed in segments
    for name, data in site.stored().items():  # under keyed names, sealed: no ID in the clear
        for snapshot in (first, *pushed):
            assert snapshot not in name and snapshot.encode() not in data
            assert bytes.fromhex(snapshot) not in data
    versions = {r["ref"]: r["version"] for r in on_b.json("remote", "refs")["refs"]}
    assert versions == {"main": 12} and first not in pushed


def test_over_a_thousand_versions_behind_at_the_default_bound_still_fast_forward(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    from tillage.features.sync.refs import read_ref, write_ref

    a, b = machines(dir_site)
    key, _first, on_b = started(a, b, dir_site, folder)
    (folder / "notes.txt").write_text("the last of many\n")
    last = a.json("sync", "--push")["snapshot"]["id"]
    remote = dir_site.open()
    recovery = documents_key(remote, key)
    # 1,100 more pushes, written as a pusher writes them (their heads are never fetched), then
    # the real head again on top.
    for i in range(1101):
        current = read_ref(remote, recovery, "main")
        assert current is not None
        head = f"{i:064x}" if i < 1100 else last
        assert write_ref(remote, recovery, "main", head, current, "m", expect=current.token)
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == last
    assert manifest(on_b.cwd) == manifest(folder)
    assert on_b.json("remote", "refs")["refs"][0]["version"] == 1103


# -- rollback -------------------------------------------------------------------------------------


def test_an_older_ref_put_back_is_refused_by_push_and_pull_until_accepted(
    site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(site)
    _key, _first, on_b = started(a, b, site, folder)
    remote = site.open()
    (ref_name,) = remote.list("refs/")
    old = remote.get(ref_name)
    (folder / "notes.txt").write_text("two\n")
    second = a.json("sync", "--push")["snapshot"]["id"]
    assert on_b.json("sync", "--pull")["disposition"] == "fast_forwarded"  # B saw it too
    remote.put(ref_name, old)  # the remote restored from a backup, or replayed

    (folder / "notes.txt").write_text("three\n")
    held = everything(site)
    b_files, b_timeline = manifest(on_b.cwd), on_b.json("timeline")["snapshots"]
    run = a("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert "--accept-rollback" in run.error["next"]
    assert run.error["details"]["seen_version"] == 2
    assert run.error["details"]["found_version"] == 1
    run = on_b("--json", "sync", "--pull")  # B changed nothing: still not told up_to_date
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert everything(site) == held  # no lease, no ref, no object written
    assert manifest(on_b.cwd) == b_files and on_b.json("timeline")["snapshots"] == b_timeline
    listed = on_b.json("remote", "refs")["refs"]
    assert [(r["ref"], r["problem"], r["version"], r["seen_version"]) for r in listed] == [
        ("main", "rolled_back", 1, 2)
    ]

    # A accepts: its head holds the newer work, so the ref goes on from what A saw (S2 stays
    # in its history) and B, which saw S2, fast-forwards.
    third = a.json("sync", "--push", "--accept-rollback")["snapshot"]["id"]
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == third
    assert manifest(on_b.cwd) == manifest(folder)
    assert on_b.json("remote", "refs")["refs"][0]["version"] == 3
    assert second != third


def test_a_deleted_ref_is_refused_not_recreated_and_repaired_from_memory(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, first, on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    remote.delete(ref_name)
    (folder / "notes.txt").write_text("two\n")

    run = a("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert "holds no head" in run.error["message"]
    assert remote.list("refs/") == []
    run = on_b("--json", "sync", "--pull")
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    listed = a.json("remote", "refs")["refs"]
    assert [(r["ref"], r["problem"], r["seen_version"]) for r in listed] == [("main", "missing", 1)]

    fixed = a.json("remote", "repair-ref", "--ref", "main")
    assert (fixed["repaired"], fixed["problem"], fixed["snapshot"], fixed["version"]) == (
        True,
        "missing",
        first,
        2,
    )
    assert on_b.json("sync", "--pull")["disposition"] == "up_to_date"
    pushed = a.json("sync", "--push")["snapshot"]["id"]
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == pushed


def test_a_deleted_ref_accepted_as_lost_is_pushed_anew(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, _first, on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    remote.delete(ref_name)
    (folder / "notes.txt").write_text("two\n")
    pushed = a.json("sync", "--push", "--accept-rollback")["snapshot"]["id"]
    # A's head holds what it saw: the ref goes on from there, and B fast-forwards.
    assert a.json("remote", "refs")["refs"][0]["version"] == 2
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == pushed


# -- the listing ----------------------------------------------------------------------------------


def test_remote_refs_lists_every_ref_and_a_damaged_one_with_its_problem(
    site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(site)
    _key, first, on_b = started(a, b, site, folder)
    (folder / "notes.txt").write_text("two\n")
    second = a.json("sync", "--push")["snapshot"]["id"]
    other = a.json("sync", "--push", "--ref", "feature/x")["snapshot"]["id"]
    machine = (a.home / "remotes" / "machine-id").read_text().strip()

    listed = on_b.json("remote", "refs")
    assert listed["remote"] == "origin"
    rows = {r["ref"]: r for r in listed["refs"]}
    assert set(rows) == {"main", "feature/x"}
    assert (rows["main"]["snapshot"], rows["main"]["version"]) == (second, 2)
    assert (rows["feature/x"]["snapshot"], rows["feature/x"]["version"]) == (other, 1)
    for row in rows.values():
        assert row["machine"] == machine and row["problem"] is None
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", row["pushed_at"])

    # One damaged head is listed as such, the others as they are.
    remote = site.open()
    names = remote.list("refs/")
    for name in names:
        remote.put(name, remote.get(name)[:30])
        break
    rows = on_b.json("remote", "refs")["refs"]
    damaged = [r for r in rows if r["problem"] == "damaged"]
    sound = [r for r in rows if r["problem"] is None]
    assert len(damaged) == 1 and len(sound) == 1 and len(rows) == 2
    assert damaged[0]["snapshot"] is None and damaged[0]["version"] is None
    assert first != second


def test_a_follower_reports_a_rollback_each_cycle_and_accepts_it_once_when_told(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    from tests.sync.test_follow import Follow

    a, b = machines(dir_site)
    _key, _first, on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    old = remote.get(ref_name)
    (folder / "notes.txt").write_text("two\n")
    second = a.json("sync", "--push")["snapshot"]["id"]
    assert on_b.json("sync", "--pull")["disposition"] == "fast_forwarded"
    remote.put(ref_name, old)
    held, files = everything(dir_site), manifest(on_b.cwd)

    follower = Follow(on_b, on_b.cwd, "--poll-seconds", "0.05")
    try:
        for _ in range(3):  # each cycle, never a push of B's state over the older ref
            _, line = follower.until(lambda d: True)
            assert line["error"]["name"] == "sync.rollback", line
            assert line["pulled"] is None and line["pushed"] is None
    finally:
        follower.stop()
    assert everything(dir_site) == held and manifest(on_b.cwd) == files

    follower = Follow(on_b, on_b.cwd, "--poll-seconds", "0.05", "--accept-rollback")
    try:
        _, line = follower.until(lambda d: True)
        assert line["error"] is None and line["pulled"] == "up_to_date", line
        # B's folder holds what it saw (S2): its push goes on from there, above the version
        # every machine saw, so A, which pushed S2, is not refused.
        assert line["pushed"] is not None
    finally:
        follower.stop()
    listed = a.json("remote", "refs")["refs"]
    assert [(r["problem"], r["version"]) for r in listed] == [(None, 3)]
    pulled = a.json("sync", "--pull")
    assert pulled["disposition"] in ("up_to_date", "fast_forwarded"), pulled
    assert manifest(folder) == manifest(on_b.cwd)
    assert second


def test_a_clone_in_a_store_that_saw_a_newer_ref_refuses_an_older_one_before_making_a_folder(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    key, first, on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    old = remote.get(ref_name)
    (folder / "notes.txt").write_text("two\n")
    a.json("sync", "--push")
    assert on_b.json("sync", "--pull")["disposition"] == "fast_forwarded"
    remote.put(ref_name, old)

    run = b("--json", "clone", dir_site.url, "again", "--key", key)
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert not (b.cwd / "again").exists()
    cloned = b.json("clone", dir_site.url, "again", "--key", key, "--accept-rollback")
    assert cloned["head"]["merged_from"] == first
    # A fresh store has seen nothing: it trusts what it finds.
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    assert third.json("clone", dir_site.url, "c", "--key", key)["head"]["merged_from"] == first


def test_a_push_to_an_emptied_remote_this_machine_saw_refs_on_is_refused_until_accepted(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    import shutil

    a, b = machines(dir_site)
    _key, _first, on_b = started(a, b, dir_site, folder)
    root = Path(dir_site.url)
    shutil.rmtree(root)
    root.mkdir()  # emptied, or a mount point with its disk away
    (folder / "notes.txt").write_text("two\n")

    run = a("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert "--accept-rollback" in run.error["next"]
    assert list(root.iterdir()) == []  # no key check, no lease, no object made there
    run = on_b("--json", "sync", "--pull")  # nothing is written by a pull: as it was
    assert run.code == 1 and run.error["name"] == "sync.not_a_remote", run.stdout
    pushed = a.json("sync", "--push", "--accept-rollback")["snapshot"]["id"]
    pulled = on_b.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == pushed
    assert manifest(on_b.cwd) == manifest(folder)


def test_a_repair_from_an_older_memory_is_caught_and_the_newer_memory_wins(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    _key, first, on_b = started(a, b, dir_site, folder)
    (on_b.cwd / "notes.txt").write_text("two, from b\n")
    second = on_b.json("sync", "--push")["snapshot"]["id"]  # A has not seen it
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    remote.put(ref_name, remote.get(ref_name)[:50])

    fixed = a.json("remote", "repair-ref")  # A saw only version 1
    assert (fixed["snapshot"], fixed["version"]) == (first, 2)
    run = on_b("--json", "sync", "--pull")
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert run.error["details"]["found_snapshot"] == first
    on_b.json("sync", "--push", "--accept-rollback")  # B's head holds what B saw
    assert a.json("remote", "refs")["refs"][0]["version"] == 3
    pulled = a.json("sync", "--pull")
    assert pulled["disposition"] == "fast_forwarded" and pulled["remote_snapshot"] == second
    assert manifest(folder) == manifest(on_b.cwd)


def test_work_in_a_store_that_saw_a_newer_input_ref_refuses_an_older_one(
    dir_site: Site, machines: Machines, folder: Path, tmp_path: Path
) -> None:
    a, b = machines(dir_site)
    key, first, on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    old = remote.get(ref_name)
    (folder / "notes.txt").write_text("two\n")
    a.json("sync", "--push")
    assert on_b.json("sync", "--pull")["disposition"] == "fast_forwarded"
    remote.put(ref_name, old)
    runner_tmp = tmp_path / "runner-tmp"
    runner_tmp.mkdir()
    args = ("work", "--remote", dir_site.url, "--key", key, "--result-ref", "ci")

    run = b("--json", *args, "--", "true", env={"TMPDIR": str(runner_tmp)})
    assert run.code == 1 and run.error["name"] == "sync.rollback", run.stdout
    assert [r["ref"] for r in a.json("remote", "refs")["refs"]] == ["main"]  # no result
    done = b.json(*args, "--accept-rollback", "--", "true", env={"TMPDIR": str(runner_tmp)})
    assert done["input"] == first and done["exit_code"] == 0


def test_a_repair_sends_what_the_remote_lost_of_the_head_so_a_clone_of_it_works(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    key, first, _on_b = started(a, b, dir_site, folder)
    remote = dir_site.open()
    for name in remote.list("refs/") + remote.list("packs/") + remote.list("index/"):
        remote.delete(name)  # the head and everything it reached, gone

    fixed = a.json("remote", "repair-ref")
    assert (fixed["repaired"], fixed["problem"], fixed["snapshot"]) == (True, "missing", first)
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    assert third.json("clone", dir_site.url, "c", "--key", key)["head"]["merged_from"] == first
    assert manifest(b.cwd / "c") == manifest(folder)
