"""A damaged store (INV-3, INV-4): torn packs, a lost index, a flipped byte in an object."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.faults.harness import (
    STATE_A,
    STATE_B,
    STATE_C,
    Manifest,
    assert_crashed,
    clear,
    crash,
    flip_byte,
    flip_payload,
    manifest,
    noise,
    packs,
    record_of,
    records,
    remove_index,
    rewind,
    verify_store,
    write_state,
)
from tillage.core.ids import chunk_id
from tillage.store.packs import HEADER_SIZE


def _cat(till: Till, snapshot: str, path: str) -> bytes:
    return base64.b64decode(till.json("cat", snapshot, path)["content_base64"])


def _pack_problems(verify: dict[str, Any], pack: Path) -> list[str]:
    return [p["problem"] for p in verify["problems"] if p["object"] == pack.name]


def test_garbage_after_the_last_record_of_a_pack_hides_nothing_and_repair_cuts_it(
    till: Till, folder: Path
) -> None:
    # Changed by issue 6: bytes after a pack's last whole record are an append that never
    # completed, so never referenced: not damage (verify stays ok); --repair cuts them.
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_C)
    second = till.json("snap")["snapshot"]["id"]
    pack = till.home / "packs" / record_of(till.home, bytes.fromhex(second)).location.pack
    packs_bytes = sum(p.stat().st_size for p in packs(till.home))
    pack.chmod(0o644)
    with open(pack, "ab") as f:
        f.write(b"TRC1" + noise(7, 300))

    verify = verify_store(till)
    assert verify["ok"] is True
    assert _pack_problems(verify, pack) == []
    assert verify["damaged_snapshots"] == []
    assert _cat(till, first, "README.md") == STATE_A["README.md"]
    assert _cat(till, second, "notes.txt") == STATE_C["notes.txt"]

    repaired = verify_store(till, "--repair")
    assert repaired["ok"] is True and repaired["damaged_snapshots"] == []
    assert repaired["repaired"] >= 1
    assert sum(p.stat().st_size for p in packs(till.home)) == packs_bytes, "the tail was cut"
    assert verify_store(till)["ok"] is True, "a repaired store verifies clean"
    assert _cat(till, second, "notes.txt") == STATE_C["notes.txt"]
    rewind(till, first)
    assert manifest(folder) == state_a
    write_state(folder, STATE_B)
    state_b = manifest(folder)
    third = till.json("snap")["snapshot"]["id"]
    write_state(folder, STATE_C)
    rewind(till, third)
    assert manifest(folder) == state_b


def test_a_pack_torn_mid_record_by_a_crash_is_skipped_and_the_next_seal_rewrites_its_objects(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    old_packs = set(packs(till.home))
    write_state(folder, STATE_B)
    state_b = manifest(folder)
    assert_crashed(crash(till, "pack.after_write", "kill", "snap"), "pack.after_write", "kill")
    (orphan,) = set(packs(till.home)) - old_packs
    size = orphan.stat().st_size
    orphan.chmod(0o644)
    with open(orphan, "r+b") as f:
        f.truncate(size - 40)  # the crash cut the last record short
    # Crashes right after creating a pack, and half-way through its magic.
    (till.home / "packs" / "00000000000000ee.pack").write_bytes(b"")
    (till.home / "packs" / "00000000000000ef.pack").write_bytes(b"TILL")

    verify = verify_store(till)
    # Issue 6: packs a killed seal left behind (nothing indexes them, no writer holds them)
    # are not damage: verify stays ok and gives their space back.
    assert verify["ok"] is True and verify["damaged_snapshots"] == []
    assert verify["reclaimed_packs"] == 3
    assert verify["reclaimed_bytes"] == size - 40 + 4
    assert not orphan.exists()
    assert _cat(till, first, "big.bin") == STATE_A["big.bin"]

    repaired = verify_store(till, "--repair")
    assert repaired["damaged_snapshots"] == []
    second = till.json("snap")["snapshot"]["id"]
    assert verify_store(till)["damaged_snapshots"] == []
    rewind(till, first)
    assert manifest(folder) == state_a
    rewind(till, second)
    assert manifest(folder) == state_b


def test_a_deleted_index_is_rebuilt_with_the_same_snapshots_and_pins(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    state_a = manifest(folder)
    first = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, STATE_B)
    till.json("snap", "-m", "second")
    till.json("pin", first)
    write_state(folder, STATE_C)
    state_c = manifest(folder)
    third = till.json("snap")["snapshot"]["id"]
    before = till.json("timeline")["snapshots"]

    remove_index(till.home)

    assert till.json("timeline")["snapshots"] == before
    assert [s["pinned"] for s in before] == [False, False, True]
    rewind(till, first)
    assert manifest(folder) == state_a
    remove_index(till.home)
    rewind(till, third)
    assert manifest(folder) == state_c


VICTIM = b"the only copy of these bytes\n" * 20


def _three_snapshots(
    till: Till, folder: Path
) -> tuple[list[str], list[dict[str, Any]], list[Manifest]]:
    """S1 {common, other}, S2 {common, victim}, S3 {common, other2, d/x}.

    Returns their IDs, the states written and the folder's manifest at each seal.
    """
    states: list[dict[str, Any]] = [
        {"common.txt": b"common\n", "other.txt": b"other\n"},
        {"common.txt": b"common\n", "victim.txt": VICTIM},
        {"common.txt": b"common\n", "other2.txt": b"other2\n", "d/x.txt": b"x\n"},
    ]
    ids, shapes = [], []
    for n, state in enumerate(states):
        write_state(folder, state)
        shapes.append(manifest(folder))
        verb = ("watch", "--no-daemon") if n == 0 else ("snap",)
        doc = till.json(*verb)
        ids.append((doc.get("head") or doc.get("snapshot"))["id"])
    return ids, states, shapes


def test_a_flipped_byte_in_an_object_is_an_integrity_error_never_wrong_bytes(
    till: Till, folder: Path
) -> None:
    (s1, s2, s3), states, shapes = _three_snapshots(till, folder)
    victim = chunk_id(VICTIM)
    flip_payload(till.home, victim)

    verify = verify_store(till)
    assert verify["ok"] is False
    assert victim.hex() in [p["object"] for p in verify["problems"]]

    run = till("--json", "cat", s2, "victim.txt")
    assert run.code == 1 and run.error["code"] == -32067
    raw = till("cat", s2, "victim.txt")
    assert raw.code == 1 and raw.stdout == ""
    assert "Traceback" not in raw.stderr
    assert _cat(till, s1, "common.txt") == b"common\n"

    repaired = verify_store(till, "--repair")
    assert repaired["damaged_snapshots"] == [s2]
    # The rebuilt index still finds the records written after the damaged one (INV-3).
    assert till.json("show", s2)["snapshot"]["id"] == s2
    run = till("--json", "cat", s2, "victim.txt")
    assert run.code == 1 and run.error["code"] == -32067
    write_state(folder, states[1])
    rewind(till, s1)
    assert manifest(folder) == shapes[0]
    rewind(till, s3)
    assert manifest(folder) == shapes[2]


def test_a_rewind_to_a_snapshot_with_a_damaged_object_refuses_and_leaves_the_folder_usable(
    till: Till, folder: Path
) -> None:
    (_s1, s2, s3), _states, _shapes = _three_snapshots(till, folder)
    live = manifest(folder)
    flip_payload(till.home, chunk_id(VICTIM))

    run = till("--json", "rewind", s2, "--yes")

    assert run.code == 1, run
    assert run.error["code"] == -32067
    assert manifest(folder) == live
    status = till("--json", "status")
    assert status.code == 0, status
    rewind(till, s3)
    assert manifest(folder) == live


def test_a_damaged_chunk_of_a_large_file_refuses_the_rewind_before_the_folder_changes(
    till: Till, folder: Path
) -> None:
    """A file of a few MiB is staged and written apart from the small ones (in the pool): a
    damaged chunk of it still stops the rewind before anything is written."""
    write_state(folder, {"big.bin": noise(7, 3 << 20), "a.txt": b"a\n", "d/b.txt": b"b\n"})
    sealed = till.json("watch", "--no-daemon")["head"]["id"]
    largest = max(records(till.home), key=lambda r: r.raw_len)
    assert largest.raw_len >= 256 << 10
    loc = largest.location
    flip_byte(till.home / "packs" / loc.pack, loc.offset + HEADER_SIZE + loc.length // 2)
    clear(folder)
    live = manifest(folder)

    run = till("--json", "rewind", sealed, "--yes")

    assert run.code == 1, run
    assert run.error["code"] == -32067
    assert manifest(folder) == live
    assert till("--json", "status").code == 0


def test_verify_without_repair_names_the_snapshots_a_damaged_object_breaks(
    till: Till, folder: Path
) -> None:
    (_s1, s2, _s3), _states, _shapes = _three_snapshots(till, folder)
    flip_payload(till.home, chunk_id(VICTIM))

    assert verify_store(till)["damaged_snapshots"] == [s2]


def test_a_seal_never_reuses_a_damaged_copy_of_bytes_it_has_in_hand(
    till: Till, folder: Path
) -> None:
    _ids, states, _shapes = _three_snapshots(till, folder)
    flip_payload(till.home, chunk_id(VICTIM))
    write_state(folder, states[1])
    state = manifest(folder)
    fresh = till.json("snap")["snapshot"]["id"]
    write_state(folder, states[0])

    run = till("--json", "rewind", fresh, "--yes")

    assert run.code == 0, run
    assert manifest(folder) == state
