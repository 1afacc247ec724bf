"""A ref's history without a horizon (features/sync/refs.py) and what counts as a rollback
(features/sync/seen.py), on a memory remote: every head a ref ever held is found, the walk
reads only the segments newer than what the reader saw, and an older ref is told apart."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tillage.crypto import RecoveryKey
from tillage.features.sync import refs
from tillage.features.sync.refs import RefState, holds, read_ref, write_ref
from tillage.features.sync.seen import rolled_back
from tillage.remote.memory import MemoryRemote


class CountingRemote(MemoryRemote):
    """A memory remote that counts the segments read."""

    def __init__(self) -> None:
        super().__init__()
        self.segment_gets = 0

    def get(self, name: str) -> bytes:
        if name.startswith("history/"):
            self.segment_gets += 1
        return super().get(name)


def head(i: int) -> str:
    return f"{i:064x}"


def pushed(remote: MemoryRemote, key: RecoveryKey, count: int) -> RefState:
    """`count` pushes of heads 1..count to ref main; returns the ref as read after them."""
    for i in range(1, count + 1):
        current = read_ref(remote, key, "main")
        written = write_ref(
            remote, key, "main", head(i), current, "m", expect=current.token if current else None
        )
        assert written is not None and written.version == i
    state = read_ref(remote, key, "main")
    assert state is not None
    return state


def test_every_head_a_ref_ever_held_is_found_past_the_documents_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refs, "HISTORY", 8)
    monkeypatch.setattr(refs, "_SEGMENTS", {})
    remote, key = CountingRemote(), RecoveryKey.generate()
    state = pushed(remote, key, 1001)
    assert state.version == 1001 and state.snapshot == head(1001)
    assert 5 <= len(state.history) <= 8 and state.older is not None
    assert all(holds(remote, key, state, head(i)) for i in (1, 2, 500, 993, 1000, 1001))
    assert not holds(remote, key, state, head(5000))
    # Each head at its own version, newest first, down to the first push.
    assert list(refs._heads(remote, key, state, 0)) == [(i, head(i)) for i in range(1001, 0, -1)]


def test_the_walk_reads_only_the_segments_newer_than_the_version_the_reader_saw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refs, "HISTORY", 8)
    monkeypatch.setattr(refs, "_SEGMENTS", {})
    remote, key = CountingRemote(), RecoveryKey.generate()
    state = pushed(remote, key, 1001)
    segments = len(remote.list("history/"))
    assert segments >= 240  # four heads a segment

    assert holds(remote, key, state, head(960), at=960)
    assert remote.segment_gets <= 12  # 41 versions back: a dozen segments, not 240
    remote.segment_gets = 0
    assert not holds(remote, key, state, head(5000), at=960)  # never held: still bounded
    assert remote.segment_gets <= 12
    monkeypatch.setattr(refs, "_SEGMENTS", {})
    remote.segment_gets = 0
    assert not holds(remote, key, state, head(5000))  # nothing known: the whole past
    assert remote.segment_gets == segments
    remote.segment_gets = 0
    assert holds(remote, key, state, head(1))  # read once, kept
    assert remote.segment_gets == 0


def test_a_missing_segment_ends_the_history_instead_of_failing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refs, "HISTORY", 8)
    monkeypatch.setattr(refs, "_SEGMENTS", {})
    remote, key = CountingRemote(), RecoveryKey.generate()
    state = pushed(remote, key, 40)
    assert state.older is not None
    remote.delete(state.older)
    assert holds(remote, key, state, head(40))
    assert not holds(remote, key, state, head(1))  # not proven: the pull says diverged


def state(version: int, snapshot: int) -> RefState:
    return RefState("main", head(snapshot), version, (head(snapshot),), None, "m", 0, "t")


@pytest.mark.parametrize(
    ("found", "older"),
    [
        (state(7, 7), False),  # what was seen
        (state(8, 8), False),  # newer
        (state(6, 6), True),  # a lower version
        (state(7, 9), True),  # another snapshot at the same version
        (None, True),  # gone
    ],
)
def test_a_ref_older_than_what_was_seen_is_a_rollback(found: RefState | None, older: bool) -> None:
    assert rolled_back(state(7, 7), found) is older
    assert rolled_back(None, found) is False  # never seen: trusted on first use


def test_an_accepted_rollback_is_trusted_and_so_is_what_follows_it_but_nothing_older(
    tmp_path: Path,
) -> None:
    from tillage.errors import TillageError
    from tillage.features.sync import seen

    store = SimpleNamespace(home=tmp_path, locks_dir=tmp_path / "locks")
    remote = MemoryRemote()
    (tmp_path / "remotes").mkdir()
    any_store: Any = store

    def refused(found: RefState | None) -> bool:
        try:
            seen.check(any_store, remote, "main", found, "origin")
        except TillageError as err:
            assert err.name == "sync.rollback"
            return True
        return False

    seen.remember(any_store, remote, state(9, 9))
    assert refused(state(5, 5)) and refused(None) and not refused(state(10, 10))
    seen.accept(any_store, remote, "main", state(5, 5))
    assert not refused(state(5, 5)) and not refused(state(6, 60))  # it, and what moved on
    assert refused(state(4, 4)) and refused(state(5, 50)) and refused(None)
    assert seen.continued(any_store, remote, "main", state(5, 5)) == seen.recall(
        any_store, remote, "main"
    )
    assert seen.continued(any_store, remote, "main", state(6, 60)) is None
    seen.remember(any_store, remote, state(10, 10))  # newer than seen: the acceptance is behind
    assert refused(state(5, 5)) and not refused(state(10, 10))
    (memory,) = (tmp_path / "remotes" / "seen").glob("*/*.json")
    assert memory.stat().st_mode & 0o777 == 0o600


def test_the_version_a_head_was_synced_at_is_known_however_far_the_memory_moved(
    tmp_path: Path,
) -> None:
    from tillage.features.sync import seen

    any_store: Any = SimpleNamespace(home=tmp_path, locks_dir=tmp_path / "locks")
    remote = MemoryRemote()
    seen.synced(any_store, remote, state(5, 5))  # pushed or pulled at version 5
    for version in range(6, 400):  # then only seen (diverged pulls, listings)
        seen.remember(any_store, remote, state(version, version))
    assert seen.seen_at(any_store, remote, "main", head(5)) == 5
    assert seen.seen_at(any_store, remote, "main", head(399)) == 399  # the newest seen
    assert seen.seen_at(any_store, remote, "main", head(6)) is None  # seen, never synced
    recalled = seen.recall(any_store, remote, "main")
    assert recalled is not None and (recalled.version, recalled.snapshot) == (399, head(399))
