"""`Workspace.point_near` reads times as Python does: a naive datetime (or naive ISO text) is the
machine's local time, an aware one (or `Z` / an offset) as given, a number epoch seconds.

Each case runs a real Python process with `TZ` set (the zone is the process's, so it is never
changed under this one): two snapshots sealed at pinned instants, then naive local times
between them, in zones without daylight saving and with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.conftest import Till

# Asks point_near in this process's zone; prints each answer's snapshot ID (or null).
ASK = """
import json, sys
from datetime import datetime
import tillage.agent

args = json.loads(sys.argv[1])
ws = tillage.agent.open_workspace(args["folder"], home=args["home"])
out = []
for q in args["queries"]:
    if q["kind"] == "naive":
        when = datetime.fromisoformat(q["iso"]).replace(fold=q.get("fold", 0))
    elif q["kind"] == "now":
        when = datetime.now()
    elif q["kind"] == "epoch":
        when = q["seconds"]
    else:
        when = q["text"]
    found = ws.point_near(when)
    out.append(None if found is None else found.id)
print(json.dumps(out))
"""


def ask(till: Till, folder: Path, zone: str, queries: list[dict[str, object]]) -> list[str | None]:
    env = {**till.env(), "TZ": zone, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    doc = json.dumps({"folder": str(folder), "home": str(till.home), "queries": queries})
    proc = subprocess.run(
        [sys.executable, "-c", ASK, doc], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    answers: list[str | None] = json.loads(proc.stdout)
    return answers


def seal_at(till: Till, folder: Path, when: str, content: str) -> str:
    """Seals `folder` with the clock pinned at `when` (RFC 3339 UTC); the snapshot's ID."""
    (folder / "app.py").write_text(content)
    env = {"TILLAGE_NOW": when}
    if till("--json", "status", env=env).doc.get("attached") is not True:
        till.json("watch", "--no-daemon", env=env)
        head: str = till.json("status", env=env)["head"]["id"]
        return head
    snap: str = till.json("snap", "-m", content.strip(), env=env)["snapshot"]["id"]
    return snap


def local(zone: str, utc_text: str) -> str:
    """The wall-clock time `zone` shows at `utc_text`, as naive ISO text (the zone's own
    rules, read from the system's zoneinfo as the child process will)."""
    from zoneinfo import ZoneInfo

    at = datetime.fromisoformat(utc_text.replace("Z", "+00:00"))
    return at.astimezone(ZoneInfo(zone)).replace(tzinfo=None).isoformat()


@pytest.fixture
def two_points(till: Till, folder: Path) -> tuple[str, str]:
    """Snapshot A sealed at 00:00Z and B at 06:00Z on 1 July 2026 (summer in the north)."""
    a = seal_at(till, folder, "2026-07-01T00:00:00Z", "a\n")
    b = seal_at(till, folder, "2026-07-01T06:00:00Z", "b\n")
    assert a != b
    return a, b


# DST-free zones east and west of Greenwich, half-hour offsets, and zones in daylight saving
# on 1 July (New York, Berlin) or with it off then (Sydney, in winter).
ZONES = [
    "Asia/Tokyo",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
]


@pytest.mark.parametrize("zone", ZONES)
def test_a_naive_time_between_two_snapshots_is_local_time_and_answers_the_earlier(
    till: Till, folder: Path, two_points: tuple[str, str], zone: str
) -> None:
    a, b = two_points
    queries: list[dict[str, object]] = [
        {"kind": "naive", "iso": local(zone, "2026-07-01T03:00:00Z")},  # between A and B
        {"kind": "naive", "iso": local(zone, "2026-07-01T00:00:00Z")},  # exactly A
        {"kind": "naive", "iso": local(zone, "2026-06-30T23:59:59Z")},  # before A
        {"kind": "naive", "iso": local(zone, "2026-07-01T06:00:00Z")},  # exactly B
        {"kind": "text", "text": local(zone, "2026-07-01T03:00:00Z")},  # naive text: local too
        {"kind": "text", "text": local(zone, "2026-06-30T23:59:59Z")},
        {"kind": "text", "text": "2026-07-01T03:00:00Z"},  # Z: as given
        {"kind": "text", "text": "2026-07-01T12:00:00+09:00"},  # an offset: as given (03:00Z)
        {"kind": "text", "text": "2026-07-01T05:59:59-00:30"},  # 06:29:59Z: after B
        {"kind": "epoch", "seconds": datetime(2026, 7, 1, 3, tzinfo=UTC).timestamp()},
    ]
    assert ask(till, folder, zone, queries) == [a, a, None, b, a, None, a, a, b, a]


def test_datetime_now_in_new_york_answers_the_newest_snapshot(till: Till, folder: Path) -> None:
    """The README's `point_near(message.created_at)` with `created_at = datetime.now()`."""
    (folder / "app.py").write_text("now\n")
    till.json("watch", "--no-daemon")
    head = till.json("status")["head"]["id"]
    for zone in ("America/New_York", "America/Los_Angeles", "Asia/Tokyo"):
        assert ask(till, folder, zone, [{"kind": "now"}]) == [head], zone


def test_the_hour_a_dst_change_repeats_is_told_apart_by_fold(till: Till, folder: Path) -> None:
    """New York, 1 November 2026: 01:30 happens at 05:30Z (EDT, fold 0) and again at 06:30Z
    (EST, fold 1), as Python's own timestamp() reads it."""
    a = seal_at(till, folder, "2026-11-01T05:15:00Z", "a\n")
    b = seal_at(till, folder, "2026-11-01T06:15:00Z", "b\n")
    queries: list[dict[str, object]] = [
        {"kind": "naive", "iso": "2026-11-01T01:30:00", "fold": 0},
        {"kind": "naive", "iso": "2026-11-01T01:30:00", "fold": 1},
        {"kind": "naive", "iso": "2026-11-01T01:10:00", "fold": 0},  # 05:10Z: before A
    ]
    assert ask(till, folder, "America/New_York", queries) == [a, b, None]


def test_naive_text_with_a_fraction_is_read_to_its_last_digit(till: Till, folder: Path) -> None:
    """A seal on the second, asked for as local naive text with nanoseconds: the moment itself
    finds it, the last nanosecond before it does not."""
    a = seal_at(till, folder, "2026-07-01T00:00:00Z", "a\n")
    at = local("Asia/Tokyo", "2026-07-01T00:00:00Z")  # 2026-07-01T09:00:00
    before = local("Asia/Tokyo", "2026-06-30T23:59:59Z")
    queries: list[dict[str, object]] = [
        {"kind": "text", "text": f"{at}.000000000"},
        {"kind": "text", "text": f"{before}.999999999"},
        {"kind": "text", "text": f"{before},9999999999"},  # a comma, and more than 9 digits
        {"kind": "text", "text": f"{at}"},
    ]
    assert ask(till, folder, "Asia/Tokyo", queries) == [a, None, None, a]


def test_point_near_refuses_what_is_no_time(till: Till, folder: Path) -> None:
    import tillage.agent
    from tillage.errors import InvalidArgumentError

    seal_at(till, folder, "2026-07-01T00:00:00Z", "a\n")
    ws = tillage.agent.open_workspace(folder, home=till.home)
    assert ws is not None
    with pytest.raises(InvalidArgumentError, match="not a time"):
        ws.point_near("yesterday-ish")
    with pytest.raises(TypeError, match="point_near takes"):
        ws.point_near(True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no time"):  # before year 1 in UTC
        ws.point_near(datetime.min.replace(tzinfo=timezone(timedelta(hours=1))))
    ws.close()
