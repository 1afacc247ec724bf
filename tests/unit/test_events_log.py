"""Reading the publication log as an event stream: exact seeking by cursor, torn tails, damage,
and a log rewritten by a repair under a follower."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tillage.errors import IntegrityError
from tillage.store import events as ev
from tillage.store.publog import GENESIS, PublicationLog, encode_line


def _write_log(path: Path, count: int, *, start_seq: int = 1, step: int = 1) -> list[bytes]:
    """Writes `count` chained records fast (no fsync per line), as a long-lived store has."""
    lines, prev = [], GENESIS
    for n in range(count):
        seq = start_seq + n * step
        kind = "snapshot" if n % 3 else "event"
        body = (
            {
                "id": f"{seq:064x}",
                "workspace": "w" * 32,
                "trigger": "manual",
                "label": "x" * (n % 50),
            }
            if kind == "snapshot"
            else {"workspace": "w" * 32, "kind": "rewound", "detail": {"n": n}}
        )
        line, prev = encode_line(seq, prev, 1_700_000_000_000_000_000 + n, kind, body)
        lines.append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return lines


def _seqs_after(log: PublicationLog, after: int) -> list[int]:
    return [r.seq for r in ev.LogFollower(log, after).records()]


def test_seek_finds_exactly_the_records_after_any_cursor(tmp_path: Path) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    _write_log(log.path, 2000, start_seq=1, step=1)
    every = _seqs_after(log, 0)
    assert every == list(range(1, 2001))
    for after in (0, 1, 2, 17, 999, 1000, 1001, 1999, 2000, 2001, 10**9):
        assert _seqs_after(log, after) == [s for s in every if s > after], after


def test_seek_is_exact_when_seqs_have_gaps(tmp_path: Path) -> None:
    # A repaired log keeps the seqs of the lines it kept: there can be gaps.
    log = PublicationLog(tmp_path / "publication.log")
    _write_log(log.path, 1500, start_seq=5, step=3)
    every = _seqs_after(log, 0)
    for after in (0, 4, 5, 6, 7, 8, 2000, 4499, 4500, 4501):
        assert _seqs_after(log, after) == [s for s in every if s > after], after


@pytest.fixture(scope="session")
def large_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 100,000-record log, written once per session (read only by the tests using it)."""
    path = tmp_path_factory.mktemp("large-log") / "publication.log"
    _write_log(path, 100_000)
    return path


def test_seek_on_a_large_log_reads_a_few_lines_not_all_of_them(
    large_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PublicationLog(large_log)
    parsed = 0
    real = ev.parse_line

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal parsed
        parsed += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ev, "parse_line", counting)
    started = time.perf_counter()
    assert _seqs_after(log, 99_990) == list(range(99_991, 100_001))
    seconds = time.perf_counter() - started
    # log2(size / SCAN_BYTES) probes plus the lines of one scan window and the ten records.
    assert parsed < 200, parsed
    assert seconds < 1.0, seconds


def test_a_torn_last_line_is_not_an_event_until_it_is_whole(tmp_path: Path) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    lines = _write_log(log.path, 10)
    follower = ev.LogFollower(log, 0)
    assert [r.seq for r in follower.records()] == list(range(1, 11))
    prev = follower.position.prev
    line, _hash = encode_line(11, prev, 1, "event", {"workspace": "w", "kind": "rewound"})
    with open(log.path, "ab") as f:
        f.write(line[:30])
    assert follower.has_more()
    assert list(follower.records()) == []
    assert _seqs_after(log, 10) == []
    assert _seqs_after(log, 5) == [6, 7, 8, 9, 10]
    with open(log.path, "ab") as f:
        f.write(line[30:])
    assert [r.seq for r in follower.records()] == [11]
    assert not follower.has_more()
    assert len(lines) == 10


def test_a_torn_tail_cut_by_the_next_writer_is_never_seen(tmp_path: Path) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    _write_log(log.path, 3)
    follower = ev.LogFollower(log, 0)
    assert len(list(follower.records())) == 3
    with open(log.path, "ab") as f:
        f.write(b'{"seq":4,"prev":"ab')  # a crash mid-append
    assert list(follower.records()) == []
    log.append("event", {"workspace": "w", "kind": "rewound", "detail": {}}, 5)
    got = list(follower.records())
    assert [(r.seq, r.kind) for r in got] == [(4, "event")]


def test_a_damaged_line_in_the_middle_is_an_integrity_error(tmp_path: Path) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    lines = _write_log(log.path, 50)
    damaged = bytearray(lines[20])
    damaged[damaged.index(b'"at":') + 6] ^= 1  # a digit of the time: the hash no longer holds
    log.path.write_bytes(b"".join([*lines[:20], bytes(damaged), *lines[21:]]))
    with pytest.raises(IntegrityError):
        _seqs_after(log, 0)
    with pytest.raises(IntegrityError):
        _seqs_after(log, 20)


def test_repair_keeps_each_surviving_record_s_seq_and_a_follower_carries_on(
    tmp_path: Path,
) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    lines = _write_log(log.path, 30)
    follower = ev.LogFollower(log, 0)
    assert [r.seq for r in follower.records()][-1] == 30
    log.path.write_bytes(b"".join([*lines[:10], b"{garbage}\n", *lines[11:]]))
    assert log.salvage() == (29, 1)
    assert log.check() is None
    assert _seqs_after(log, 0) == [s for s in range(1, 31) if s != 11]
    assert _seqs_after(log, 11) == list(range(12, 31))
    # The follower saw 30 already: the rewritten file (a new inode, a different size) is found
    # again by seq, so nothing is delivered twice.
    assert list(follower.records()) == []
    log.append("event", {"workspace": "w", "kind": "rewound", "detail": {}}, 7)
    assert [r.seq for r in follower.records()] == [31]


def test_salvage_drops_a_line_whose_seq_was_damaged_and_keeps_every_other_cursor(
    tmp_path: Path,
) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    lines = _write_log(log.path, 5)
    bad = lines[2].replace(b'"seq":3', b'"seq":1')
    log.path.write_bytes(b"".join([*lines[:2], bad, *lines[3:]]))
    assert log.salvage() == (4, 1)
    assert _seqs_after(log, 0) == [1, 2, 4, 5]


def test_facts_and_events_are_refused_as_appended_kinds() -> None:
    assert "sealed" not in ev.APPENDED_KINDS and "pinned" not in ev.APPENDED_KINDS
    assert {"rewound", "conflict", "session"} <= ev.APPENDED_KINDS
    # A fork, its removal and merge, a claim and a release are facts that are their own events
    # (a merge of a stored snapshot, which changes no fork, is appended as `merged`).
    universe = {kind for kind, _, _ in ev.UNIVERSE_EVENTS.values()}
    assert universe == {"forked", "fork_removed", "merged", "claimed", "released"}
    assert "merged" in ev.APPENDED_KINDS
    assert set(ev.KINDS) == ev.APPENDED_KINDS | set(ev.FACT_EVENTS.values()) | universe


def test_a_cursor_beyond_the_end_holds_back_every_record_up_to_it(tmp_path: Path) -> None:
    log = PublicationLog(tmp_path / "publication.log")
    _write_log(log.path, 5)
    follower = ev.LogFollower(log, 7)
    assert list(follower.records()) == []
    for n in range(3):
        log.append("event", {"workspace": "w", "kind": "rewound", "detail": {}}, n)
    assert [r.seq for r in follower.records()] == [8]
