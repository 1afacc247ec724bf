"""Sync through every transport, as two machines see it through real `till` processes: the
whole round (add, push, clone, pull, diverge, merge, push) over a folder, a real sshd and moto,
with what the remote holds scanned for any plaintext; deltas; the guarantees a wrong key, a
tampered object and a truncated head must keep; and where the recovery key may appear."""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tests.faults.harness import manifest
from tests.sync.conftest import Machine, Site, files_below
from tillage.core.ids import chunk_id
from tillage.crypto import RecoveryKey, name_of, open_document

REF = "feature-canary-ref-5d1e"
CANARY = b"tillage-plaintext-canary-93fd0a1c"
SECRET = b"API_TOKEN=hunter2-canary-b6e2"
NAME = "name-canary-4417.txt"

Machines = Callable[[Site], tuple[Machine, Machine]]


def seed(folder: Path, size: int = 2 << 20) -> int:
    """A workspace with distinctive contents and names; returns its size in bytes."""
    (folder / "notes.txt").write_bytes(CANARY + b" first line\n")
    (folder / ".env").write_bytes(SECRET + b"\n")
    deep = folder / "src" / "deep"
    deep.mkdir(parents=True)
    (deep / NAME).write_bytes(CANARY * 3)
    (deep / "app.py").write_text("print('a')\n")
    (folder / "big.bin").write_bytes(random.Random(7).randbytes(size))
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def plaintext_in(stored: dict[str, bytes], needles: list[bytes]) -> list[tuple[str, bytes]]:
    """Every (object, needle) where a needle appears in an object's key or bytes."""
    found = []
    for key, data in stored.items():
        for needle in needles:
            if needle in data or needle in key.encode():
                found.append((key, needle))
    return found


def test_the_whole_round_over_each_transport(site: Site, machines: Machines, folder: Path) -> None:
    a, b = machines(site)
    size = seed(folder)
    a.json("watch", "--no-daemon")
    added = a.json("remote", "add", site.url)
    key = added["key"]
    assert len(key) == 64 and added["name"] == "origin" and added["clone_url"] == site.url
    assert a.json("remote", "list")["remotes"] == [
        {"name": "origin", "remote": added["remote"], "clone_url": site.url}
    ]

    cold = a.json("sync", "--push", "--ref", REF)
    assert cold["ref"] == REF and cold["reused_objects"] == 0
    assert cold["uploaded_objects"] >= 6  # a snapshot, three trees, chunks
    assert cold["uploaded_bytes"] >= size // 2  # random bytes do not compress
    first = cold["snapshot"]["id"]

    cloned = b.json("clone", site.url, "b", "--key", key, "--ref", REF)
    copy = b.cwd / "b"
    assert cloned["workspace"] == str(copy) and cloned["ref"] == REF
    assert manifest(copy) == manifest(folder)
    assert (copy / ".env").read_bytes() == SECRET + b"\n"
    again = b.json("sync", "--pull", "--ref", REF, cwd=copy)
    assert again["disposition"] == "up_to_date" and again["remote_snapshot"] == first

    # A small edit: an incremental push sends the file, the trees above it and the snapshot.
    with open(folder / "notes.txt", "ab") as f:
        f.write(b"a second line\n")
    delta = a.json("sync", "--push", "--ref", REF)
    assert delta["uploaded_objects"] <= 4, delta
    assert delta["reused_objects"] >= 1
    assert delta["uploaded_bytes"] < size // 100, delta  # far below the workspace's size
    inode = os.stat(copy / "big.bin").st_ino
    forward = b.json("sync", "--pull", "--ref", REF, cwd=copy)
    assert forward["disposition"] == "fast_forwarded"
    assert forward["remote_snapshot"] == delta["snapshot"]["id"]
    assert forward["fetched_objects"] == delta["uploaded_objects"]
    assert manifest(copy) == manifest(folder)
    assert os.stat(copy / "big.bin").st_ino == inode  # unchanged files keep their inodes

    # Both sides move: the pull says diverged (exit 3) and touches nothing; a push is refused.
    (copy / "src" / "deep" / "app.py").write_text("print('b, edited on b')\n")
    (folder / "notes.txt").write_bytes(CANARY + b" edited on a\n")
    a.json("sync", "--push", "--ref", REF)
    before = manifest(copy)
    run = b("--json", "sync", "--pull", "--ref", REF, cwd=copy)
    assert run.code == 3, (run.stdout, run.stderr)
    assert run.doc["disposition"] == "diverged"
    assert manifest(copy) == before
    refused = b("--json", "sync", "--push", "--ref", REF, cwd=copy)
    assert refused.code == 1 and refused.error["name"] == "sync.pull_first"

    merged = b.json("merge", "--snapshot", run.doc["remote_snapshot"], cwd=copy)
    assert merged["landed"] is True
    landed = b.json("sync", "--push", "--ref", REF, cwd=copy)
    assert landed["uploaded_objects"] >= 1
    assert a.json("sync", "--pull", "--ref", REF)["disposition"] == "fast_forwarded"
    assert manifest(folder) == manifest(copy)
    assert (folder / "notes.txt").read_bytes() == CANARY + b" edited on a\n"
    assert (folder / "src" / "deep" / "app.py").read_text() == "print('b, edited on b')\n"
    assert a.json("sync", "--pull", "--ref", REF)["disposition"] == "up_to_date"
    assert b.json("sync", "--pull", "--ref", REF, cwd=copy)["disposition"] == "up_to_date"

    # The remote never held a byte of the workspace, a file name, the ref's name, an object
    # ID or the key in the clear.
    stored = site.stored()
    assert len(stored) > cold["uploaded_objects"]
    snapshots = [first, delta["snapshot"]["id"], landed["snapshot"]["id"]]
    needles = [
        CANARY,
        SECRET,
        b"hunter2",
        NAME.encode(),
        b"notes.txt",
        REF.encode(),
        key.encode(),
        bytes.fromhex(key),
        random.Random(7).randbytes(2 << 20)[1000:1032],
        *(s.encode() for s in snapshots),
        *(bytes.fromhex(s) for s in snapshots),
    ]
    assert plaintext_in(stored, needles) == []


# -- what a failure must not write ---------------------------------------------------------------


def store_state(machine: Machine) -> dict[str, bytes]:
    """The store's packs and publication log, byte for byte (what a failed pull must not
    change), and its remotes' settings."""
    out: dict[str, bytes] = {}
    for sub in ("packs", "log", "remotes", "intents"):
        for path, data in files_below(machine.home / sub).items():
            out[path] = data
    return out


def pushed_and_cloned(site: Site, machines: Machines, folder: Path) -> tuple[Machine, Machine, str]:
    """A pushes a seeded workspace to REF; B clones it into b. Returns (a, b, key)."""
    a, b = machines(site)
    seed(folder, size=256 << 10)
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", site.url)["key"]
    a.json("sync", "--push", "--ref", REF)
    b.json("clone", site.url, "b", "--key", key, "--ref", REF)
    return a, b, key


def test_a_wrong_key_is_integrity_and_writes_nothing(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    seed(folder, size=64 << 10)
    a.json("watch", "--no-daemon")
    a.json("remote", "add", dir_site.url)
    a.json("sync", "--push")
    wrong = "0f" * 32

    other = b.cwd / "other"
    other.mkdir()
    (other / "mine.txt").write_text("mine\n")
    b.json("watch", "--no-daemon", cwd=other)
    before = store_state(b)
    run = b("--json", "remote", "add", dir_site.url, "--key", wrong, cwd=other)
    assert run.code == 1 and run.error["name"] == "integrity", run.stdout
    assert b.json("remote", "list", cwd=other)["remotes"] == []
    assert store_state(b) == before

    for how in (["--key", wrong], []):
        env = {} if how else {"TILLAGE_RECOVERY_KEY": wrong}
        run = b("--json", "clone", dir_site.url, "c", *how, env=env)
        assert run.code == 1 and run.error["name"] == "integrity", run.stdout
        assert not (b.cwd / "c").exists()
        assert store_state(b) == before


def flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


def test_a_tampered_object_fails_the_pull_and_writes_nothing(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b, key = pushed_and_cloned(dir_site, machines, folder)
    copy = b.cwd / "b"
    remote = dir_site.open()
    known = set(remote.list("objects/"))
    # 8 MiB of new chunks near the root, then a small file deep down: the pull walks level by
    # level, so it has written packs of those chunks when it meets the deep file's bytes, and
    # must discard them.
    for i in range(8):
        (folder / f"fresh-{i}.bin").write_bytes(random.Random(i).randbytes(1 << 20))
    tail = b"the last object a pull fetches\n"
    (folder / "d1" / "d2" / "d3" / "d4").mkdir(parents=True)
    (folder / "d1" / "d2" / "d3" / "d4" / "tail.txt").write_bytes(tail)
    pushed = a.json("sync", "--push", "--ref", REF)
    fresh = sorted(set(remote.list("objects/")) - known)
    assert len(fresh) == pushed["uploaded_objects"]
    originals = {name: remote.get(name) for name in fresh}
    biggest = max(fresh, key=lambda name: len(originals[name]))
    smallest = min(fresh, key=lambda name: len(originals[name]))
    recovery = RecoveryKey.from_hex(key)
    first = name_of(recovery, "object", pushed["snapshot"]["id"])
    last = name_of(recovery, "object", chunk_id(tail).hex())
    assert {first, last} <= set(fresh)

    folder_before = manifest(copy)
    store_before = store_state(b)
    timeline_before = b.json("timeline", "-n", "100", cwd=copy)["snapshots"]

    def refused(what: str) -> None:
        run = b("--json", "sync", "--pull", "--ref", REF, cwd=copy)
        assert run.code == 1, (what, run.stdout, run.stderr)
        assert run.error["name"] == "integrity", (what, run.error)
        assert manifest(copy) == folder_before, what
        assert store_state(b) == store_before, what
        assert b.json("timeline", "-n", "100", cwd=copy)["snapshots"] == timeline_before, what

    for name in (first, biggest, last):  # the first object fetched, one between, the last
        remote.put(name, flipped(originals[name]))
        refused(f"a flipped byte in {name}")
        remote.put(name, originals[name])
    damages: list[tuple[str, Callable[[], None]]] = [
        ("another object's bytes", lambda: remote.put(biggest, originals[smallest])),
        ("cut short", lambda: remote.put(biggest, originals[biggest][:100])),
        ("gone", lambda: remote.delete(biggest)),
    ]
    for what, damage in damages:
        damage()
        refused(what)

    remote.put(biggest, originals[biggest])  # mended: the next pull lands the whole snapshot
    assert b.json("sync", "--pull", "--ref", REF, cwd=copy)["disposition"] == "fast_forwarded"
    assert manifest(copy) == manifest(folder)


def test_a_clone_that_fails_while_fetching_leaves_no_folder(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    _a, b, key = pushed_and_cloned(dir_site, machines, folder)
    remote = dir_site.open()
    (name,) = [n for n in remote.list("objects/") if len(remote.get(n)) > 100 << 10]
    original = remote.get(name)
    remote.put(name, flipped(original))
    third = Machine(b.home.parent / "store-c", b.user_home, b.cwd, b.extra)
    run = third("--json", "clone", dir_site.url, "c", "--key", key, "--ref", REF)
    assert run.code == 1 and run.error["name"] == "integrity", run.stdout
    assert not (b.cwd / "c").exists()
    remote.put(name, original)
    third.json("clone", dir_site.url, "c", "--key", key, "--ref", REF)
    assert manifest(b.cwd / "c") == manifest(folder)


def test_a_truncated_ref_head_is_integrity_everywhere(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b, key = pushed_and_cloned(dir_site, machines, folder)
    copy = b.cwd / "b"
    remote = dir_site.open()
    (ref_name,) = remote.list("refs/")
    whole = remote.get(ref_name)
    (folder / "notes.txt").write_text("edited\n")
    for cut in (whole[: len(whole) // 2], whole[:10], b""):
        remote.put(ref_name, cut)
        folder_before = manifest(copy)
        store_before = store_state(b)
        pulled = b("--json", "sync", "--pull", "--ref", REF, cwd=copy)
        assert pulled.code == 1 and pulled.error["name"] == "integrity", pulled.stdout
        assert manifest(copy) == folder_before and store_state(b) == store_before
        pushed = a("--json", "sync", "--push", "--ref", REF)
        assert pushed.code == 1 and pushed.error["name"] == "integrity", pushed.stdout
        assert remote.get(ref_name) == cut  # the push replaced nothing
        for name in remote.list("leases/"):  # and left no lease held
            assert open_document(RecoveryKey.from_hex(key), name, remote.get(name))["released"]
        cloned = b("--json", "clone", dir_site.url, "c", "--key", key, "--ref", REF)
        assert cloned.code == 1 and cloned.error["name"] == "integrity", cloned.stdout
        assert not (b.cwd / "c").exists()
    remote.put(ref_name, whole)
    assert b.json("sync", "--pull", "--ref", REF, cwd=copy)["disposition"] == "up_to_date"


# -- the recovery key ----------------------------------------------------------------------------


async def _mcp_outputs(machine: Machine, root: Path) -> list[str]:
    """What a harness gets from `till mcp` (the real stdio subprocess): the tool list and the
    remote listing tool's answer."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(root), "mcp"],
        env=machine.env(),
        cwd=str(root),
    )
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        assert "workspace_remote_list" in {t.name for t in tools}
        called = await client.call_tool("workspace_remote_list", {})
        assert not called.is_error
        return [
            json.dumps([t.model_dump(mode="json") for t in tools]),
            called.model_dump_json(),
        ]


def test_the_recovery_key_is_shown_by_remote_add_alone(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    import anyio

    import tillage.agent

    a, b = machines(dir_site)
    seed(folder, size=64 << 10)
    outputs: list[str] = []

    def run(
        machine: Machine, *args: str, cwd: Path | None = None, code: int = 0, human: bool = True
    ) -> None:
        """Runs a command in both forms (the JSON document, the human text), keeping all it
        printed."""
        for form in (("--json",), ()) if human else (("--json",),):
            done = machine(*form, *args, cwd=cwd)
            assert done.code == code, (args, done.stdout, done.stderr)
            outputs.extend((done.stdout, done.stderr))

    a.json("watch", "--no-daemon")
    added = a("--json", "remote", "add", dir_site.url)
    key = added.doc["key"]
    # The human form, to another place: it names the file (0600) its new key was written to,
    # for the person to keep and copy, never the key itself.
    human = a("remote", "add", str(dir_site.cwd / "remote-2"), "--name", "second")
    assert human.code == 0
    written = next(Path(w) for w in human.stdout.split() if w.endswith(".key"))
    assert written.stat().st_mode & 0o777 == 0o600
    second = written.read_text().strip()
    assert len(second) == 64 and second not in human.stdout.lower()

    run(a, "remote", "list")
    run(a, "sync", "--push", "--remote", "origin")
    for form, dest, how in (
        ("--json", "b1", ("--key", key)),
        ("--color=never", "b2", ("--key", key)),
        ("--json", "b3", ()),
    ):
        env = {} if how else {"TILLAGE_RECOVERY_KEY": key}
        done = b(form, "clone", dir_site.url, dest, *how, env=env)
        assert done.code == 0, (done.stdout, done.stderr)
        outputs.extend((done.stdout, done.stderr))
    copy = b.cwd / "b1"
    run(b, "sync", "--pull", cwd=copy)
    (folder / "notes.txt").write_text("moved on a\n")
    (copy / "notes.txt").write_text("moved on b\n")
    run(a, "sync", "--push", "--remote", "origin")
    run(b, "sync", "--pull", cwd=copy, code=3)  # diverged
    run(b, "sync", "--push", cwd=copy, code=1)  # pull_first
    run(b, "clone", dir_site.url, "b4", "--key", "ab" * 32, code=1)  # integrity
    run(b, "clone", dir_site.url, "b5", "--key", key[:-2], code=1)  # bad_key: a key cut short
    run(b, "remote", "add", dir_site.url, "--name", "again", "--key", "cd" * 32, cwd=copy, code=1)
    for machine, root in ((a, folder), (b, copy)):
        run(machine, "remote", "list", cwd=root)
        run(machine, "status", cwd=root, human=False)
        run(machine, "timeline", cwd=root, human=False)
        run(machine, "events", "--all", cwd=root, human=False)
        run(machine, "mcp", "--list", cwd=root, human=False)
        outputs.extend(anyio.run(_mcp_outputs, machine, root))
        tillage.agent.forget()
        for tool in tillage.agent.tools(root, home=machine.home):  # the Python seam
            if tool.name == "workspace_remote_list":
                result = tool.call({})
                outputs.extend((result.text, json.dumps(result.document)))
        tillage.agent.forget()

    # Not the key, nor a piece of it (its first or last 12 hex digits).
    pieces = [k for full in (key, second) for k in (full, full[:12], full[-12:])]
    leaks = [(piece, out) for out in outputs for piece in pieces if piece in out.lower()]
    assert leaks == []
    # Nowhere in either store but the remotes' settings and the key files remote add wrote
    # (0600), nor on the remote.
    for machine in (a, b):
        for path, data in files_below(machine.home).items():
            where = Path(path).parent.name
            if (where, Path(path).suffix) in (("remotes", ".json"), ("keys", ".key")):
                assert Path(path).stat().st_mode & 0o077 == 0, path
                continue
            assert key.encode() not in data.lower(), path
            assert bytes.fromhex(key) not in data, path
    assert plaintext_in(dir_site.stored(), [key.encode(), bytes.fromhex(key)]) == []


# -- dispositions a user relies on ---------------------------------------------------------------


def test_a_push_with_nothing_new_moves_nothing(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    seed(folder, size=16 << 10)
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", dir_site.url)["key"]
    pushed = a.json("sync", "--push")["snapshot"]["id"]
    b.json("clone", dir_site.url, "b", "--key", key)
    copy = b.cwd / "b"
    again = b.json("sync", "--push", cwd=copy)  # nothing changed on b since the clone
    assert again["uploaded_objects"] == 0
    pulled = a.json("sync", "--pull")
    assert pulled["disposition"] == "up_to_date" and pulled["remote_snapshot"] == pushed
    a.json("sync", "--push")
    assert b.json("sync", "--pull", cwd=copy)["disposition"] == "up_to_date"


def test_a_pull_after_merging_the_incoming_is_not_diverged(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    seed(folder, size=16 << 10)
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", dir_site.url)["key"]
    a.json("sync", "--push")
    b.json("clone", dir_site.url, "b", "--key", key)
    copy = b.cwd / "b"
    (folder / "notes.txt").write_text("edited on a\n")
    (copy / "src" / "deep" / "app.py").write_text("print('edited on b')\n")
    incoming = a.json("sync", "--push")["snapshot"]["id"]
    assert b("--json", "sync", "--pull", cwd=copy).code == 3
    assert b.json("merge", "--snapshot", incoming, cwd=copy)["landed"] is True
    merged = manifest(copy)
    run = b("--json", "sync", "--pull", cwd=copy)
    assert run.code == 0, run.stdout
    assert run.doc["disposition"] == "up_to_date"
    assert manifest(copy) == merged
    b.json("sync", "--push", cwd=copy)
    assert a.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert manifest(folder) == merged


def test_a_diverged_pull_merges_even_when_the_store_knows_the_snapshot_from_another_ref(
    dir_site: Site, machines: Machines, folder: Path
) -> None:
    a, b = machines(dir_site)
    seed(folder, size=16 << 10)
    a.json("watch", "--no-daemon")
    key = a.json("remote", "add", dir_site.url)["key"]
    a.json("sync", "--push")
    b.json("clone", dir_site.url, "b", "--key", key)
    copy = b.cwd / "b"
    (folder / "notes.txt").write_text("released on a\n")
    released = a.json("sync", "--push", "--ref", "release")["snapshot"]["id"]
    assert a.json("sync", "--push")["snapshot"]["id"] == released  # main moves there too
    b.json("clone", dir_site.url, "b-release", "--key", key, "--ref", "release")

    (copy / "src" / "deep" / "app.py").write_text("print('edited on b')\n")
    run = b("--json", "sync", "--pull", cwd=copy)
    assert run.code == 3 and run.doc["remote_snapshot"] == released
    # What the pull says to run lands it (the base named: the store met this snapshot first
    # as another ref's head, with no parent here).
    advice = shlex.split(run.doc["next"])
    assert advice[:4] == ["till", "merge", "--snapshot", released], advice
    merged = b("--json", *advice[1:], cwd=copy)
    assert merged.code == 0, merged.stdout
    assert (copy / "notes.txt").read_text() == "released on a\n"
    assert (copy / "src" / "deep" / "app.py").read_text() == "print('edited on b')\n"
    b.json("sync", "--push", cwd=copy)
    assert a.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert manifest(folder) == manifest(copy)
