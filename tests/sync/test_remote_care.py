"""Looking after a remote, through real `till` processes: `remote check` finds every kind of
damage, `remote repair` mends each from this machine's store (and says what it cannot, and
who could), `remote rekey` gives a remote a new recovery key without sending its data again,
and `remote add` probes and looks before it writes anything."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from tests.faults.harness import manifest
from tests.remote.s3_proxy import S3Proxy
from tests.sync.conftest import Machine, Site, files_below

Machines = Callable[[Site], tuple[Machine, Machine]]


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def pushed(site: Site, machines: Machines, folder: Path) -> tuple[Machine, Machine, str]:
    """A pushes ~20 MiB (two data packs and a metadata pack) to main. Returns (a, b, key)."""
    a, b = machines(site)
    (folder / "notes.txt").write_text("notes\n")
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("print('a')\n")
    for i in range(20):
        (folder / f"data-{i}.bin").write_bytes(random.Random(i).randbytes(1 << 20))
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", site.url)["key"]
    a.json("sync", "--push")
    return a, b, key


def check(machine: Machine, *extra: str) -> dict[str, object]:
    run = machine("--json", "remote", "check", *extra)
    assert run.code in (0, 1), (run.stdout, run.stderr)
    assert (run.code == 0) == run.doc["ok"], run.stdout
    doc: dict[str, object] = run.doc
    return doc


def test_check_finds_each_damage_and_repair_mends_each(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b, key = pushed(dir_site, machines, folder)
    remote = dir_site.open()
    healthy = check(a, "--read-data")
    assert healthy["ok"] is True and healthy["problems"] == [] and healthy["refs"] == 1
    assert healthy["packs"] == len(remote.list("packs/")) >= 2
    packs = remote.list("packs/")
    biggest = max(packs, key=lambda n: len(remote.get(n)))
    smallest = min(packs, key=lambda n: len(remote.get(n)))
    (index,) = remote.list("index/")
    orphan_pack = biggest

    damages: list[tuple[str, Callable[[], None], bool]] = [
        # (what, the damage, whether a check without --read-data sees it)
        (
            "a blob's byte flipped",
            lambda: remote.put(biggest, flipped(remote.get(biggest), 30)),
            False,
        ),
        (
            "the trailer's byte flipped",
            lambda: remote.put(
                smallest, flipped(remote.get(smallest), len(remote.get(smallest)) - 3)
            ),
            True,
        ),
        ("a pack cut short", lambda: remote.put(biggest, remote.get(biggest)[: 1 << 20]), True),
        ("a pack deleted", lambda: remote.delete(biggest), True),
        ("the index deleted", lambda: [remote.delete(n) for n in remote.list("index/")], True),
    ]
    for what, damage, cheap in damages:
        damage()
        found = check(a, "--read-data")
        assert found["ok"] is False and found["problems"], (what, found)
        if cheap:
            assert check(a)["ok"] is False, what
        # A damage only reading the data finds is repaired by reading it.
        repaired = a("--json", "remote", "repair", *(() if cheap else ("--read-data",)))
        assert repaired.code == 0, (what, repaired.stdout, repaired.stderr)
        assert repaired.doc["ok"] is True and repaired.doc["unrepaired"] == [], what
        after = check(a, "--read-data")
        assert after["ok"] is True and after["problems"] == [], (what, after)
        third = Machine(b.home.parent / f"store-{len(what)}", b.user_home, b.cwd, b.extra)
        third.json("clone", dir_site.url, f"c-{len(what)}", "--key", key)
        assert manifest(b.cwd / f"c-{len(what)}") == manifest(folder), what
        biggest = max(remote.list("packs/"), key=lambda n: len(remote.get(n)))
        smallest = min(remote.list("packs/"), key=lambda n: len(remote.get(n)))
    del index, orphan_pack


def test_repair_says_what_it_cannot_mend_and_which_machine_could(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b, key = pushed(dir_site, machines, folder)
    remote = dir_site.open()
    (b.cwd / "b-own").mkdir()
    b.json("watch", "--no-daemon", cwd=b.cwd / "b-own")
    b.json("remote", "add", dir_site.url, "--key", key, cwd=b.cwd / "b-own")
    biggest = max(remote.list("packs/"), key=lambda n: len(remote.get(n)))
    remote.delete(biggest)

    # B never held a's files: it can report, not mend; exit 1 with the document.
    run = b("--json", "remote", "repair", cwd=b.cwd / "b-own")
    assert run.code == 1, (run.stdout, run.stderr)
    assert run.doc["ok"] is False and run.doc["unrepaired"]
    machine_a = (a.home / "remotes" / "machine-id").read_text().strip()
    assert {u["pushed_by"] for u in run.doc["unrepaired"]} == {machine_a}
    assert {u["this_machine"] for u in run.doc["unrepaired"]} == {False}
    assert "repair" in run.doc["next"]
    # A can.
    done = a.json("remote", "repair")
    assert done["ok"] is True and done["resent_objects"] >= len(run.doc["unrepaired"])
    assert check(a, "--read-data")["ok"] is True


def test_a_push_sends_again_what_the_index_lost(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b, key = pushed(dir_site, machines, folder)
    remote = dir_site.open()
    for name in remote.list("packs/") + remote.list("index/"):
        remote.delete(name)
    (folder / "notes.txt").write_text("a change, so the push moves the ref\n")
    again = a.json("sync", "--push")
    assert again["uploaded_bytes"] > 20 << 20  # everything, not just the change
    b.json("clone", dir_site.url, "c", "--key", key)
    assert manifest(b.cwd / "c") == manifest(folder)


def test_rekey_gives_a_new_key_that_clones_and_the_old_one_opens_nothing(
    site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(site)
    (folder / "notes.txt").write_text("kept across a rekey\n")
    a.json("watch", "--no-daemon")
    old = a.json("remote", "add", site.url)["key"]
    a.json("sync", "--push")
    packs_before = sorted(k for k in site.stored() if "/packs/" in f"/{k}")

    rekeyed = a.json("remote", "rekey")
    new = rekeyed["key"]
    assert len(new) == 64 and new != old
    assert Path(rekeyed["key_file"]).read_text().strip() == new  # kept in a file too (0600)
    assert Path(rekeyed["key_file"]).stat().st_mode & 0o077 == 0
    assert old not in json.dumps(a.json("remote", "list"))
    assert sorted(k for k in site.stored() if "/packs/" in f"/{k}") == packs_before  # no data
    # This workspace goes on with the new key by itself.
    (folder / "notes.txt").write_text("after the rekey\n")
    a.json("sync", "--push")
    cloned = b("--json", "clone", site.url, "new", "--key", new)
    assert cloned.code == 0, cloned.stdout
    assert manifest(b.cwd / "new") == manifest(folder)
    refused = b("--json", "clone", site.url, "old", "--key", old)
    assert refused.code == 1 and refused.error["name"] == "integrity", refused.stdout
    assert not (b.cwd / "old").exists()
    # A new key file of one's own: the key is written there, never shown.
    chosen = a.cwd.parent / "chosen.key"
    given = a.json("remote", "rekey", "--new-key-file", str(chosen))
    assert "key" not in given and given["key_file"] == str(chosen)
    # Another machine's stored key opens nothing now: told so, and given the new one by the
    # same `remote add`, which records it once it opens the remote.
    stale = b("--json", "sync", "--pull", cwd=b.cwd / "new")
    assert stale.code == 1 and stale.error["name"] == "integrity", stale.stdout
    assert "remote add" in stale.error["next"]
    b.json("remote", "add", site.url, "--key-file", str(chosen), cwd=b.cwd / "new")
    assert b.json("sync", "--pull", cwd=b.cwd / "new")["disposition"] == "up_to_date"
    assert b.json("clone", site.url, "chosen", "--key-file", str(chosen))["ref"] == "main"
    # The key being replaced is refused as the new one, and nothing changes.
    again = a("--json", "remote", "rekey", "--new-key-file", str(chosen))
    assert again.code == 1 and again.error["name"] == "invalid_argument", again.stdout


def test_a_folder_that_is_not_empty_and_not_a_remote_is_refused_as_it_was(
    machines: Machines, dir_site: Site, folder: Path, tmp_path: Path
) -> None:
    a, _b = machines(dir_site)
    (folder / "x.txt").write_text("x\n")
    a.json("watch", "--no-daemon")
    place = tmp_path / "my-documents"
    place.mkdir()
    (place / "letter.txt").write_text("dear\n")
    (place / ".git").mkdir()
    before = files_below(place)
    run = a("--json", "remote", "add", str(place))
    assert run.code == 1 and run.error["name"] == "sync.not_a_remote", run.stdout
    assert files_below(place) == before and sorted(p.name for p in place.iterdir()) == [
        ".git",
        "letter.txt",
    ]
    assert a.json("remote", "list")["remotes"] == []


def test_a_new_key_over_a_remote_says_it_is_occupied_and_never_that_a_key_was_printed(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    (folder / "x.txt").write_text("x\n")
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", dir_site.url)["key"]
    (b.cwd / "own").mkdir()
    b.json("watch", "--no-daemon", cwd=b.cwd / "own")
    before = files_below(Path(dir_site.url))
    run = b("--json", "remote", "add", dir_site.url, cwd=b.cwd / "own")
    assert run.code == 1 and run.error["name"] == "sync.remote_occupied", run.stdout
    wrong = b("--json", "remote", "add", dir_site.url, "--key", "0f" * 32, cwd=b.cwd / "own")
    assert wrong.code == 1 and wrong.error["name"] == "integrity", wrong.stdout
    for said in (run.error, wrong.error):
        assert "printed" not in said["message"] + said["next"], said
    assert files_below(Path(dir_site.url)) == before
    assert b.json("remote", "add", dir_site.url, "--key", key, cwd=b.cwd / "own")["name"]


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(
    s3_site: Site, s3_proxy: S3Proxy, machines: Machines, folder: Path
) -> None:
    a, b = machines(s3_site)
    a.process = True  # each command its own process: what "once per process" is about
    (folder / "x.txt").write_text("x\n")
    a.json("watch", "--no-daemon")
    s3_proxy.ignore_conditions = True
    through = {"TILLAGE_S3_ENDPOINT": s3_proxy.endpoint}
    for _attempt in range(2):  # refused, and refused the same way again: nothing was left
        run = a("--json", "remote", "add", s3_site.url, env=through)
        assert run.code == 1 and run.error["name"] == "sync.remote_unavailable", run.stdout
        assert "conditional" in run.error["message"]
        assert s3_site.stored() == {}
        assert a.json("remote", "list")["remotes"] == []
    # The store mended (the proxy passes the headers again): the same add works, key shown.
    s3_proxy.ignore_conditions = False
    added = a.json("remote", "add", s3_site.url, env=through)
    assert len(added["key"]) == 64
    a.json("sync", "--push", env=through)

    # The endpoint is the one recorded at `remote add`: a process whose environment names
    # another store still reaches this one...
    elsewhere = {"TILLAGE_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ENDPOINT_URL": "http://x:9"}
    (folder / "x.txt").write_text("y\n")
    assert a.json("sync", "--push", env=elsewhere)["uploaded_objects"] >= 1
    # ...and every process proves conditional writes before its first write: the store now
    # ignoring them, a push is refused and the ref stays where it was.
    s3_proxy.ignore_conditions = True
    (folder / "x.txt").write_text("z\n")
    refs = {k: v for k, v in s3_site.stored().items() if "/refs/" in k}
    run = a("--json", "sync", "--push")
    assert run.code == 1 and run.error["name"] == "sync.remote_unavailable", run.stdout
    assert {k: v for k, v in s3_site.stored().items() if "/refs/" in k} == refs
    del b


def test_a_clone_and_a_pull_over_s3_make_requests_by_the_pack_not_by_the_file(
    s3_site: Site, s3_proxy: S3Proxy, machines: Machines, folder: Path
) -> None:
    a, b = machines(s3_site)
    for d in range(20):
        (folder / f"d{d}").mkdir()
        for i in range(50):  # 1,000 files in 20 folders, ~1.2 MiB
            (folder / f"d{d}" / f"f{i}.txt").write_bytes(random.Random(d * 100 + i).randbytes(1200))
    a.json("watch", "--no-daemon")
    through = {"TILLAGE_S3_ENDPOINT": s3_proxy.endpoint}
    key = a.json("remote", "add", s3_site.url, env=through)["key"]
    s3_proxy.reset()
    cold = a.json("sync", "--push", env=through)
    assert cold["uploaded_objects"] > 1000
    assert sum(s3_proxy.counts.values()) < 30, s3_proxy.counts  # a few packs, an index, a ref

    s3_proxy.reset()
    b.json("clone", s3_site.url, "c", "--key", key, env=through)
    assert manifest(b.cwd / "c") == manifest(folder)
    assert s3_proxy.counts["GET"] < 20, s3_proxy.counts  # not 1,000+ (one per object)

    for d in range(0, 20, 4):  # a change in 5 folders
        (folder / f"d{d}" / "f0.txt").write_text(f"changed {d}\n")
    a.json("sync", "--push", env=through)
    s3_proxy.reset()
    pulled = b.json("sync", "--pull", cwd=b.cwd / "c", env=through)
    assert pulled["disposition"] == "fast_forwarded" and pulled["fetched_objects"] >= 10
    assert s3_proxy.counts["GET"] < 12, s3_proxy.counts
    assert manifest(b.cwd / "c") == manifest(folder)


# -- what the remote's objects tell --------------------------------------------------------------


def test_no_remote_object_has_the_size_of_a_sealed_file_and_counts_say_nothing_of_files(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    from tillage.crypto import OVERHEAD
    from tillage.features.sync.transfer import closure
    from tillage.store.store import Store

    a, _b = machines(dir_site)
    sizes = [300_000, 123_457, 4_096, 77, 1 << 20]
    for i, size in enumerate(sizes):  # a "known file" of each size, incompressible
        (folder / f"known-{i}.bin").write_bytes(random.Random(i).randbytes(size))
    for d in range(2_000):  # 20,000 files in 2,000 folders
        (folder / "many" / f"d{d:04d}").mkdir(parents=True)
        for i in range(10):
            (folder / "many" / f"d{d:04d}" / f"f{i}.txt").write_text(f"{d} {i}\n")
    a.json("watch", "--no-daemon")
    a.json("remote", "add", dir_site.url)
    pushed = a.json("sync", "--push")
    assert pushed["uploaded_objects"] > 22_000
    stored = {k: len(v) for k, v in dir_site.stored().items() if "/." not in k}
    # A few packs and one index: the object count is not the file count (22,000+ objects).
    assert len([k for k in stored if "/packs/" in k]) <= 4, sorted(stored)
    assert len(stored) <= 10, sorted(stored)
    with Store.open(a.home) as store:
        sealed = {
            len(store.read_record(oid)) + OVERHEAD
            for oid, _kind in closure(store, pushed["snapshot"]["id"])
        }
    assert not sealed & set(stored.values()), sorted(sealed & set(stored.values()))
    # Owner-only, everywhere on the remote, and this machine's cache of its indexes.
    root = Path(dir_site.url)
    cache = a.home / "remotes" / "index"
    assert list(cache.rglob("*"))
    for path in [root, *root.rglob("*"), cache, *cache.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_a_format_1_remote_is_refused_with_the_way_out(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    from tillage.crypto import RecoveryKey, key_check, name_of

    a, b = machines(dir_site)
    key = RecoveryKey.generate()
    root = Path(dir_site.url)
    root.mkdir()
    (root / "config").write_bytes(key_check(key))  # what tillage before format 2 wrote
    name = name_of(key, "object", "ab" * 32)
    (root / name).parent.mkdir(parents=True)
    (root / name).write_bytes(b"an old object")
    before = files_below(root)
    (folder / "x.txt").write_text("x\n")
    a.json("watch", "--no-daemon")
    for run in (
        a("--json", "remote", "add", dir_site.url, "--key", key.hex()),
        b("--json", "clone", dir_site.url, "c", "--key", key.hex()),
    ):
        assert run.code == 1 and run.error["name"] == "sync.old_format", run.stdout
        assert run.error["code"] == -32296
        assert "till remote add" in run.error["next"] and "push" in run.error["next"]
    assert files_below(root) == before and not (b.cwd / "c").exists()
    wrong = a("--json", "remote", "add", dir_site.url, "--key", "0f" * 32)
    assert wrong.code == 1 and wrong.error["name"] == "integrity", wrong.stdout


def test_an_s3_prefix_holding_other_things_is_refused_as_it_was(
    s3_site: Site, machines: Machines, folder: Path
) -> None:
    a, _b = machines(s3_site)
    (folder / "x.txt").write_text("x\n")
    a.json("watch", "--no-daemon")
    s3_site.open().put("reports/2026.csv", b"someone else's data")
    before = s3_site.stored()
    run = a("--json", "remote", "add", s3_site.url)
    assert run.code == 1 and run.error["name"] == "sync.not_a_remote", run.stdout
    assert s3_site.stored() == before
