"""A rewind puts back what a snapshot holds exactly: hard links as links, sparse files sparse,
read-only folders, trees deeper than the OS path limit.

The snapshots here are built directly from entries (hard-link entries, hole refs, deep trees), so
the restore side is tested on its own; `till rewind` then runs as a real process.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import DEEP_NAMES, open_deep, read_deep, write_at
from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import blob_id, chunk_id
from tillage.core.models import HOLE_ID, ChunkRef, ContentKind, Entry, EntryFlag, EntryKind
from tillage.workspace.attach import find_workspace
from tillage.workspace.seal import SealOptions, publish_tree
from tillage.workspace.trees import HOLE_PIECE, flatten, iter_file_chunks, write_manifest

MTIME = 1_700_000_000_000_000_000


def _name(path: str) -> bytes:
    return path.rsplit("/", 1)[-1].encode("utf-8", "surrogateescape")


class Snap:
    """Builds a snapshot of a workspace from entries, as capture would have sealed it."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.chunks: dict[bytes, bytes] = {}
        self.blobs: dict[bytes, bytes] = {}

    def dir(self, path: str, mode: int = 0o755) -> Snap:
        self.entries[path] = Entry(
            _name(path), EntryKind.DIR, mode, 0, MTIME, ContentKind.TREE, b""
        )
        return self

    def file(self, path: str, data: bytes, *, mode: int = 0o644, link: str = "") -> Snap:
        cid = chunk_id(data)
        self.chunks[cid] = data
        self.entries[path] = Entry(
            _name(path),
            EntryKind.FILE,
            mode,
            len(data),
            MTIME,
            ContentKind.CHUNK,
            cid,
            flags=EntryFlag.HARDLINK if link else EntryFlag.NONE,
            link=link.encode("utf-8", "surrogateescape"),
        )
        return self

    def sparse(self, path: str, parts: list[bytes | int]) -> Snap:
        """A large file of data pieces (bytes) and holes (int: that many zero bytes)."""
        refs = []
        for part in parts:
            if isinstance(part, int):
                refs.append(ChunkRef(HOLE_ID, part))
            else:
                cid = chunk_id(part)
                self.chunks[cid] = part
                refs.append(ChunkRef(cid, len(part)))
        size = sum(r.length for r in refs)
        encoded = codec.encode_blob(size, refs)
        bid = blob_id(encoded)
        self.blobs[bid] = encoded
        self.entries[path] = Entry(
            _name(path), EntryKind.FILE, 0o644, size, MTIME, ContentKind.BLOB, bid
        )
        return self

    def seal(self, till: Till, folder: Path) -> str:
        ws = find_workspace(till.home, folder)
        assert ws is not None, "attach the folder first"
        try:
            with ws.store.writer() as writer:
                for cid, data in self.chunks.items():
                    writer.put(Kind.CHUNK, cid, data)
                for bid, encoded in self.blobs.items():
                    writer.put(Kind.BLOB, bid, encoded)
                root = write_manifest(writer, self.entries)
                files = [e for e in self.entries.values() if e.kind is EntryKind.FILE]
                row = publish_tree(
                    ws.store,
                    ws.id,
                    writer,
                    root,
                    len(files),
                    sum(e.size for e in files),
                    [],
                    SealOptions(trigger="manual", label="built by the test"),
                )
        finally:
            ws.store.close()
        return row.id


def _attach(till: Till) -> None:
    till.json("watch", "--no-daemon")


# -- hard links ------------------------------------------------------------------------------


def test_hard_links_come_back_as_one_file_with_both_names(till: Till, folder: Path) -> None:
    _attach(till)
    sid = (
        Snap()
        .file("a.txt", b"shared bytes\n")
        .dir("sub")
        .file("sub/b.txt", b"shared bytes\n", link="a.txt")
        .seal(till, folder)
    )

    doc = till.json("rewind", sid, "--yes")

    a, b = os.stat(folder / "a.txt"), os.stat(folder / "sub" / "b.txt")
    assert (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    assert a.st_nlink == 2
    assert (folder / "sub" / "b.txt").read_bytes() == b"shared bytes\n"
    assert doc["unlinked"] == []


def test_two_separate_files_with_equal_bytes_become_one_linked_pair(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_bytes(b"same\n")
    (folder / "b.txt").write_bytes(b"same\n")
    _attach(till)
    sid = Snap().file("a.txt", b"same\n").file("b.txt", b"same\n", link="a.txt").seal(till, folder)

    preview = till.json("rewind", sid, "--dry-run")
    till.json("rewind", sid, "--yes")

    assert [c["path"] for c in preview["changes"]] == ["b.txt"]
    assert os.stat(folder / "a.txt").st_ino == os.stat(folder / "b.txt").st_ino


def test_a_linked_pair_becomes_two_files_again_when_the_snapshot_holds_two_files(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_bytes(b"same\n")
    os.link(folder / "a.txt", folder / "b.txt")
    _attach(till)
    sid = Snap().file("a.txt", b"same\n").file("b.txt", b"same\n").seal(till, folder)
    os.link(folder / "a.txt", folder / "c.txt")  # something to change, whatever capture saw

    till.json("rewind", sid, "--yes")

    assert os.stat(folder / "a.txt").st_ino != os.stat(folder / "b.txt").st_ino
    assert not (folder / "c.txt").exists()
    (folder / "b.txt").write_bytes(b"changed\n")
    assert (folder / "a.txt").read_bytes() == b"same\n"


def test_a_hard_link_whose_first_name_is_outside_the_scope_comes_back_as_a_plain_file(
    till: Till, folder: Path
) -> None:
    _attach(till)
    sid = (
        Snap()
        .file("a.txt", b"shared\n")
        .dir("sub")
        .file("sub/b.txt", b"shared\n", link="a.txt")
        .seal(till, folder)
    )

    doc = till.json("rewind", sid, "--paths", "sub", "--yes")

    assert (folder / "sub" / "b.txt").read_bytes() == b"shared\n"
    assert os.stat(folder / "sub" / "b.txt").st_nlink == 1
    assert not (folder / "a.txt").exists()
    assert doc["unlinked"] == ["sub/b.txt"]


@pytest.mark.parametrize("link", ["../outside.txt", "sub/../../outside.txt", "missing.txt"])
def test_a_hard_link_that_names_no_file_in_the_snapshot_is_written_as_a_plain_file(
    till: Till, folder: Path, link: str
) -> None:
    outside = folder.parent / "outside.txt"
    outside.write_bytes(b"outside\n")
    _attach(till)
    sid = Snap().dir("sub").file("sub/b.txt", b"mine\n", link=link).seal(till, folder)

    doc = till.json("rewind", sid, "--yes")

    assert (folder / "sub" / "b.txt").read_bytes() == b"mine\n"
    assert os.stat(folder / "sub" / "b.txt").st_nlink == 1
    assert outside.read_bytes() == b"outside\n" and os.stat(outside).st_nlink == 1
    assert doc["unlinked"] == ["sub/b.txt"]


# -- sparse files ----------------------------------------------------------------------------

MIB = 1 << 20


def _sparse_snapshot(till: Till, folder: Path) -> tuple[str, bytes]:
    head = os.urandom(64 * 1024)
    middle = os.urandom(64 * 1024)
    parts: list[bytes | int] = [head, 16 * MIB, middle, 8 * MIB]
    expected = head + bytes(16 * MIB) + middle + bytes(8 * MIB)
    sid = Snap().sparse("disk.img", parts).seal(till, folder)
    return sid, expected


def test_a_sparse_file_comes_back_sparse(till: Till, folder: Path) -> None:
    _attach(till)
    sid, expected = _sparse_snapshot(till, folder)

    till.json("rewind", sid, "--yes")

    path = folder / "disk.img"
    assert path.stat().st_size == len(expected)
    assert path.read_bytes() == expected
    assert path.stat().st_blocks * 512 < 2 * MIB, "the holes were written as zeros"


def test_reading_a_sparse_file_from_the_store_yields_zeros_in_bounded_pieces(
    till: Till, folder: Path
) -> None:
    _attach(till)
    sid, expected = _sparse_snapshot(till, folder)
    ws = find_workspace(till.home, folder)
    assert ws is not None
    try:
        row = ws.store.snapshot(sid)
        assert row is not None
        entry = flatten(ws.store, bytes.fromhex(row.tree))["disk.img"]
        pieces = list(iter_file_chunks(ws.store, entry))
    finally:
        ws.store.close()
    assert b"".join(pieces) == expected
    assert max(len(p) for p in pieces) <= HOLE_PIECE


# -- read-only folders (as a user permissions apply to) --------------------------------------

NOBODY = 65534


def _as_nobody() -> list[str]:
    """The command prefix that runs a process as uid/gid 65534, or a skip reason."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("cannot switch to another user here: setpriv is missing")
    probe = subprocess.run(
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot switch to another user here: {probe.stderr!r}")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@pytest.fixture
def unprivileged() -> Iterator[tuple[list[str], Path]]:
    """A prefix running commands as a user that permissions bind, and a scratch folder it
    owns (outside root's private pytest directory)."""
    prefix = _as_nobody()
    scratch = Path(tempfile.mkdtemp(prefix="tillage-ro-"))
    try:
        if prefix:
            os.chmod(scratch, 0o755)
            os.chown(scratch, NOBODY, NOBODY)
        yield prefix, scratch
    finally:
        for dirpath, dirnames, _files in os.walk(scratch):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(scratch, ignore_errors=True)


def _run(
    prefix: list[str], scratch: Path, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    env.update(TILLAGE_HOME=str(scratch / "store"), HOME=str(scratch / "home"))
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [*prefix, sys.executable, "-m", "tillage", "--json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.process
def test_a_read_only_folder_is_rewound_and_keeps_its_read_only_mode(
    unprivileged: tuple[list[str], Path],
) -> None:
    import json

    prefix, scratch = unprivileged
    setup = [*prefix, sys.executable, "-c"]
    script = (
        "import os, sys; s = sys.argv[1]\n"
        "os.makedirs(s + '/home/project/locked/inner')\n"
        "open(s + '/home/project/locked/f.txt', 'w').write('v1')\n"
        "open(s + '/home/project/locked/inner/g.txt', 'w').write('g1')\n"
    )
    subprocess.run([*setup, script, str(scratch)], check=True)
    folder = scratch / "home" / "project"
    first = _run(prefix, scratch, folder, "watch", "--no-daemon")
    assert first.returncode == 0, first
    head = json.loads(first.stdout)["head"]["id"]
    change = (
        "import os, sys; s = sys.argv[1] + '/home/project/locked'\n"
        "open(s + '/f.txt', 'w').write('v2')\n"
        "os.unlink(s + '/inner/g.txt')\n"
        "open(s + '/new.txt', 'w').write('new')\n"
        "os.chmod(s + '/inner', 0o555)\n"
        "os.chmod(s, 0o555)\n"
    )
    subprocess.run([*setup, change, str(scratch)], check=True)

    run = _run(prefix, scratch, folder, "rewind", head, "--yes")

    assert run.returncode == 0, run
    locked = folder / "locked"
    assert (locked / "f.txt").read_text() == "v1"
    assert (locked / "inner" / "g.txt").read_text() == "g1"
    assert not (locked / "new.txt").exists()
    # The folders' recorded modes (as sealed: writable) are back; nothing was left lent.
    assert stat.S_IMODE(locked.stat().st_mode) == 0o755
    # And a folder that was read-only when sealed is read-only again after a rewind to it.
    subprocess.run([*setup, "import os,sys; os.chmod(sys.argv[1], 0o555)", str(locked)], check=True)
    second = _run(prefix, scratch, folder, "snap")
    assert second.returncode == 0, second
    ro = json.loads(second.stdout)["snapshot"]["id"]
    subprocess.run([*setup, "import os,sys; os.chmod(sys.argv[1], 0o755)", str(locked)], check=True)
    (subprocess.run([*setup, f"open({str(locked / 'x.txt')!r}, 'w').write('x')"], check=True))

    run = _run(prefix, scratch, folder, "rewind", ro, "--yes")

    assert run.returncode == 0, run
    assert not (locked / "x.txt").exists()
    assert stat.S_IMODE(locked.stat().st_mode) == 0o555


# -- deeper than PATH_MAX --------------------------------------------------------------------


def test_a_tree_deeper_than_the_path_limit_is_rewound(till: Till, folder: Path) -> None:
    _attach(till)
    snap = Snap()
    path = ""
    for name in DEEP_NAMES:
        path = f"{path}/{name}" if path else name
        snap.dir(path)
    snap.file(f"{path}/leaf.txt", b"at the bottom\n")
    sid = snap.seal(till, folder)

    till.json("rewind", sid, "--yes")

    assert read_deep(folder, "leaf.txt") == b"at the bottom\n"


def test_cleaning_up_after_an_interrupted_rewind_reaches_below_the_path_limit(
    folder: Path,
) -> None:
    from tillage.platform.folders import remove_temp_files as _remove_temp_files
    from tillage.platform.folders import remove_tree as _remove_tree

    fd = open_deep(folder, create=True)
    for leftover in (".leaf.txt.tillage-tmp-0123", "keep.txt"):
        write_at(fd, leftover, b"")
    os.close(fd)

    _remove_temp_files(folder)
    assert read_deep(folder, "keep.txt") == b""
    with pytest.raises(FileNotFoundError):
        read_deep(folder, ".leaf.txt.tillage-tmp-0123")

    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _remove_tree(root, DEEP_NAMES[0])
    finally:
        os.close(root)
    assert list(folder.iterdir()) == []


# -- end to end: what capture seals comes back -----------------------------------------------


def test_a_sealed_folder_with_hard_links_and_a_sparse_file_round_trips(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_bytes(b"linked\n")
    (folder / "sub").mkdir()
    os.link(folder / "a.txt", folder / "sub" / "b.txt")
    with open(folder / "disk.img", "wb") as f:
        f.write(b"start")
        f.seek(32 * MIB)
        f.write(b"end")
    sealed = till.json("watch", "--no-daemon")["head"]["id"]
    for child in folder.iterdir():
        if child.name != ".tillage":
            shutil.rmtree(child) if child.is_dir() else child.unlink()

    till.json("rewind", sealed, "--yes")

    assert os.stat(folder / "a.txt").st_ino == os.stat(folder / "sub" / "b.txt").st_ino
    img = folder / "disk.img"
    assert img.stat().st_size == 32 * MIB + 3
    assert img.stat().st_blocks * 512 < MIB
    with open(img, "rb") as f:
        assert f.read(5) == b"start"
        f.seek(32 * MIB)
        assert f.read() == b"end"


def test_a_sealed_tree_deeper_than_the_path_limit_round_trips(till: Till, folder: Path) -> None:
    from tillage.platform.folders import remove_tree as _remove_tree

    shallow = till.json("watch", "--no-daemon")["head"]["id"]
    fd = open_deep(folder, create=True)
    write_at(fd, "leaf.txt", b"deep\n")
    os.close(fd)
    deep = till.json("snap")["snapshot"]["id"]

    till.json("rewind", shallow, "--yes")
    assert [p.name for p in folder.iterdir()] == [".tillage"]
    till.json("rewind", deep, "--yes")
    assert read_deep(folder, "leaf.txt") == b"deep\n"
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _remove_tree(root, DEEP_NAMES[0])
    finally:
        os.close(root)


def test_verify_finds_nothing_wrong_with_a_sealed_sparse_file(till: Till, folder: Path) -> None:
    with open(folder / "disk.img", "wb") as f:
        f.write(b"data")
        f.seek(8 * MIB)
        f.write(b"more")
    till.json("watch", "--no-daemon")

    report = till.json("verify")

    assert report["ok"] is True and report["damaged_snapshots"] == []


# -- placing a wiped tree away from the inodes its wipe just freed ----------------------------


def _inode_flags(path: Path) -> int | None:
    import array
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, 0x80086601, flags, True)  # FS_IOC_GETFLAGS
        return flags[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def test_a_rewind_after_a_wipe_leaves_the_folders_attributes_as_it_found_them(
    till: Till, folder: Path
) -> None:
    if _inode_flags(folder) is None:
        pytest.skip("this file system has no inode attributes (FS_IOC_GETFLAGS)")
    before = _inode_flags(folder)
    for d in range(5):
        (folder / f"d{d}").mkdir()
        for i in range(20):
            (folder / f"d{d}" / f"f{i}").write_bytes(b"x" * 100)
    sealed = till.json("watch", "--no-daemon")["head"]["id"]
    for d in range(5):
        shutil.rmtree(folder / f"d{d}")

    till.json("rewind", sealed, "--yes")

    assert sorted(p.name for p in folder.iterdir()) == [".tillage", *(f"d{d}" for d in range(5))]
    assert (folder / "d4" / "f19").read_bytes() == b"x" * 100
    assert _inode_flags(folder) == before, "the placement hint is taken back after the rewind"
