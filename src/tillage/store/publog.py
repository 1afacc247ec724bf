"""The publication log: the durable, hash-chained record of what the store has published.

Snapshots, attachments, pins and forgets are facts only once their line is in this log and
fsynced (INV-5). Each line carries the hash of the line before it, so a damaged or edited log is
detected, and a torn last line (a crash mid-append) is cut by the next writer (INV-6).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tillage.core.ids import log_link
from tillage.errors import IntegrityError
from tillage.platform import failpoints
from tillage.platform.fs import atomic_write, fsync_dir, raise_if_disk_full
from tillage.store.control import aside_name, set_aside

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GENESIS = "0" * 64


@dataclass(frozen=True)
class LogRecord:
    seq: int
    at_ns: int
    kind: str
    body: dict[str, Any]
    hash: str
    end_offset: int


def _canonical(seq: int, at_ns: int, kind: str, body: dict[str, Any]) -> bytes:
    doc = {"seq": seq, "at": at_ns, "kind": kind, "body": body}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def encode_line(
    seq: int, prev: str, at_ns: int, kind: str, body: dict[str, Any]
) -> tuple[bytes, str]:
    """Returns one record as its log line (with the newline) and its hash."""
    line_hash = log_link(prev, _canonical(seq, at_ns, kind, body))
    doc = {"seq": seq, "prev": prev, "at": at_ns, "kind": kind, "body": body, "hash": line_hash}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n", line_hash


def parse_line(line: bytes, prev_hash: str, end_offset: int) -> LogRecord:
    """Parses one whole line and checks it chains to `prev_hash`."""
    try:
        doc = json.loads(line)
        seq, at_ns, kind, body = doc["seq"], doc["at"], doc["kind"], doc["body"]
        claimed = doc["hash"]
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"publication log line does not parse: {exc}") from exc
    if (
        doc.get("prev") != prev_hash
        or log_link(prev_hash, _canonical(seq, at_ns, kind, body)) != claimed
    ):
        raise IntegrityError(f"publication log breaks its hash chain at record {seq}")
    return LogRecord(seq, at_ns, kind, body, claimed, end_offset)


class PublicationLog:
    """Appends to and reads the log file; appends must hold the store's publish lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read_from(self, offset: int, prev_hash: str) -> Iterator[LogRecord]:
        """Yields the whole, chained records after byte `offset` (a torn last line is skipped)."""
        if not self.path.exists():
            return
        if not self.path.is_file():
            raise IntegrityError("publication log is not a file (a folder is in its place)")
        with open(self.path, "rb") as f:
            f.seek(offset)
            pos = offset
            for line in f:
                if not line.endswith(b"\n"):
                    return  # torn tail: not published (INV-6)
                pos += len(line)
                record = parse_line(line[:-1], prev_hash, pos)
                prev_hash = record.hash
                yield record

    def check(self) -> str | None:
        """Reads the whole chain; returns what is wrong with it, or None."""
        try:
            for _record in self.read_from(0, GENESIS):
                pass
        except IntegrityError as exc:
            return exc.message
        return None

    def salvage(self) -> tuple[int, int]:
        """Rewrites the log as a fresh chain of every line that still parses and whose own hash
        still holds (its content is what was written; only its link to a dropped predecessor
        may be broken); returns (kept, dropped). The caller holds the publish lock. A damaged
        line is dropped; the
        lines after it keep their facts under new hashes (INV-6), and their `seq`, which is an
        event's cursor (`till events --after`): a reader's cursor means the same after a repair.
        A seq that no longer increases (damage) becomes the one after its predecessor."""
        kept: list[tuple[int, int, str, dict[str, Any]]] = []
        dropped = 0
        if self.path.exists() and not self.path.is_file():
            set_aside(self.path)  # a folder in its place: kept for a person, nothing in it parses
            dropped += 1
        if self.path.exists():
            for line in self.path.read_bytes().split(b"\n"):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                    seq, at_ns, kind, body = doc["seq"], doc["at"], doc["kind"], doc["body"]
                    own = log_link(str(doc["prev"]), _canonical(seq, at_ns, kind, body))
                    if own != doc["hash"] or not isinstance(body, dict):
                        raise ValueError("the line's own hash does not hold: edited or damaged")
                    last = kept[-1][0] if kept else 0
                    seq = seq if type(seq) is int and seq > last else last + 1
                    kept.append((seq, int(at_ns), str(kind), body))
                except (ValueError, KeyError, TypeError, AttributeError):
                    dropped += 1
            if dropped:  # what could not be kept stays readable beside it, not destroyed
                import shutil  # 4 ms (it imports the compressors), for a rare repair

                shutil.copy2(self.path, aside_name(self.path))
        out, prev = [], GENESIS
        for seq, at_ns, kind, body in kept:
            line, prev = encode_line(seq, prev, at_ns, kind, body)
            out.append(line)
        atomic_write(self.path, b"".join(out))
        return len(kept), dropped

    def _tail(self) -> tuple[int, str, int]:
        """Returns (last seq, last hash, length of the whole-line prefix) of the log."""
        seq, last, good = 0, GENESIS, 0
        for record in self.read_from(0, GENESIS):
            seq, last, good = record.seq, record.hash, record.end_offset
        return seq, last, good

    def append(
        self, kind: str, body: dict[str, Any], at_ns: int, tail: tuple[int, str, int] | None = None
    ) -> LogRecord:
        """Appends one record durably and returns it. The caller holds the publish lock.

        `tail` (seq, hash, offset) may be passed when the caller already knows the log's end;
        it is checked against the file size so a stale tail is never trusted.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        size = self.path.stat().st_size if self.path.exists() else 0
        if tail is None or tail[2] != size:
            tail = self._tail()
        seq, prev, good = tail
        seq += 1
        line, line_hash = encode_line(seq, prev, at_ns, kind, body)
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                if size != good:
                    os.ftruncate(fd, good)  # cut a torn tail left by a crash (INV-6)
                os.lseek(fd, good, os.SEEK_SET)
                failpoints.hit("publog.before_append")
                os.write(fd, line)
                failpoints.hit("publog.before_fsync")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise_if_disk_full(exc)
            raise
        if created:
            fsync_dir(self.path.parent)
        return LogRecord(seq, at_ns, kind, body, line_hash, good + len(line))
