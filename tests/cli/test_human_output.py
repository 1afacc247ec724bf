"""What a person at a terminal reads from the real `till`: units, direction, the next command,
colour only where wanted, and progress only on a terminal's stderr."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Run, Till

ANSI = "\x1b["

# Runs `till` with a clock that moves half a second each time the progress printer reads it: a
# slow operation, without waiting for one.
SLOW = (
    "import itertools, sys; "
    "from tillage.hosts.cli import main as m; "
    "from tillage.hosts.cli.progress import ProgressPrinter; "
    "ticks = itertools.count(0, 0.5); "
    "m._progress_printer = lambda: ProgressPrinter(sys.stderr, clock=lambda: next(ticks)); "
    "sys.exit(m.main(sys.argv[1:]))"
)


def run(till: Till, *args: str, **env: str) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", *args],
        cwd=till.cwd,
        env={**till.env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def attach(till: Till, folder: Path) -> str:
    (folder / "a.txt").write_text("a" * 3000)
    (folder / "b.txt").write_text("b")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    assert isinstance(first, str)
    return first


@pytest.mark.process
def test_the_timeline_shows_sizes_and_ages_for_people(till: Till, folder: Path) -> None:
    attach(till, folder)
    (folder / "big.bin").write_bytes(os.urandom(300_000))
    till.json("snap", "-m", "precious")
    out = run(till, "timeline", TILLAGE_NOW="2100-01-01T00:00:00Z").stdout
    now = run(till, "timeline").stdout
    newest, oldest = now.splitlines()
    assert re.search(r"just now|\d+ s ago", newest)
    assert "296 KiB" in newest and "3 files" in newest and "precious" in newest
    assert "2.9 KiB" in oldest and "initial" in oldest
    assert newest.index("precious") > newest.index("KiB")
    after_ids = "\n".join(line[12:] for line in now.splitlines())
    assert not re.search(r"\d{5}|\d{4}-\d\d-\d\dT", after_ids)  # no raw bytes or stamps
    assert "ago" not in out  # a pinned clock decides what "ago" means


@pytest.mark.process
def test_diff_says_it_compares_a_snapshot_with_the_live_folder(till: Till, folder: Path) -> None:
    first = attach(till, folder)
    (folder / "a.txt").write_text("shorter")
    (folder / "c.txt").write_text("new")
    lines = run(till, "diff", first[:8]).stdout.splitlines()
    assert re.match(
        rf"From {first[:12]} \((just now|\d+ s ago), initial\) to the live folder", lines[0]
    )
    assert lines[1].split() == ["modified", "-2.9", "KiB", "a.txt"]
    assert lines[2].split() == ["added", "+3", "B", "c.txt"]
    doc = till.json("diff", first)
    assert doc["from_snapshot"]["id"] == first and doc["to_snapshot"] is None


@pytest.mark.process
def test_the_printed_commands_apply_a_dry_run_and_undo_the_rewind(till: Till, folder: Path) -> None:
    first = attach(till, folder)
    (folder / "a.txt").write_text("changed")
    dry = run(till, "rewind", first[:8], "--dry-run").stdout
    apply = dry.splitlines()[-1].strip()
    assert apply == f"till rewind {first} --yes"
    assert "rescue" not in dry and "(none)" not in dry
    assert (folder / "a.txt").read_text() == "changed"

    done = run(till, *apply.split()[1:])
    assert done.code == 0, done.stderr
    assert (folder / "a.txt").read_text() == "a" * 3000
    undo = done.stdout.splitlines()[-1].strip()
    assert re.fullmatch(r"till rewind [0-9a-f]{64} --yes", undo)
    assert "rescue" not in done.stdout and "(none)" not in done.stdout

    assert run(till, *undo.split()[1:]).code == 0
    assert (folder / "a.txt").read_text() == "changed"


def test_rewind_tells_agents_the_next_command_too(till: Till, folder: Path) -> None:
    (folder / "sub dir").mkdir()
    (folder / "sub dir" / "x").write_text("x")
    first = attach(till, folder)
    (folder / "sub dir" / "x").write_text("changed")
    dry = till.json("rewind", first, "--dry-run", "--paths", "sub dir")
    assert dry["next"] == f"till rewind {first} --yes --paths 'sub dir'"
    done = till.json("rewind", first, "--yes", "--paths", "sub dir")
    assert done["next"] == f"till rewind {done['undo']} --yes --paths 'sub dir'"
    assert (folder / "sub dir" / "x").read_text() == "x"


def test_a_bad_or_unknown_id_says_so_before_asking_for_yes(till: Till, folder: Path) -> None:
    attach(till, folder)
    assert till("--json", "rewind", "abc").error["name"] == "snapshot.bad_id"
    assert till("--json", "rewind", "abcdef").error["name"] == "snapshot.not_found"
    assert till("--json", "rewind", "ab" * 32).error["name"] == "snapshot.not_found"
    human = till("rewind", "abc")
    assert "snapshot.bad_id" in human.stderr and "--yes" not in human.stderr.split("[")[0]


@pytest.mark.process
def test_colour_appears_only_where_asked(till: Till, folder: Path) -> None:
    attach(till, folder)
    assert ANSI not in run(till, "timeline").stdout  # a pipe
    assert ANSI in run(till, "--color", "always", "timeline").stdout
    assert ANSI in run(till, "timeline", "--color=always", NO_COLOR="1").stdout
    assert ANSI not in run(till, "--color", "never", "timeline").stdout
    assert ANSI not in run(till, "--json", "--color", "always", "timeline").stdout


@pytest.mark.process
def test_no_color_turns_colour_off_on_a_terminal(till: Till, folder: Path) -> None:
    attach(till, folder)
    assert ANSI in on_a_terminal(till, [sys.executable, "-m", "tillage", "timeline"], stdout=True)
    shown = on_a_terminal(
        till, [sys.executable, "-m", "tillage", "timeline"], stdout=True, NO_COLOR="1"
    )
    assert ANSI not in shown and "initial" in shown


def on_a_terminal(till: Till, argv: list[str], *, stdout: bool = False, **env: str) -> str:
    """Runs with stderr (and stdout, when asked) on a pseudo-terminal; returns what it showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv,
        cwd=till.cwd,
        env={**till.env(), "TERM": "xterm", **env},
        stdin=subprocess.DEVNULL,
        stdout=slave if stdout else subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode()


def make_files(folder: Path, n: int) -> None:
    for i in range(n):
        (folder / f"f{i:03}.txt").write_text(f"file {i}\n" * 100)


@pytest.mark.process
def test_a_slow_seal_shows_progress_on_a_terminal_and_ends_the_line(
    till: Till, folder: Path
) -> None:
    attach(till, folder)
    make_files(folder, 40)
    shown = on_a_terminal(till, [sys.executable, "-c", SLOW, "snap"])
    assert "\rsealing  " in shown and " files  " in shown and "/s" in shown
    assert shown.endswith("\n") or shown.endswith("\r\n")


@pytest.mark.process
def test_no_progress_on_a_pipe_or_under_json(till: Till, folder: Path) -> None:
    attach(till, folder)
    make_files(folder, 40)
    piped = subprocess.run(
        [sys.executable, "-c", SLOW, "snap"],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and piped.stderr == ""
    (folder / "f000.txt").write_text("again")
    shown = on_a_terminal(till, [sys.executable, "-c", SLOW, "--json", "snap"])
    assert "sealing" not in shown and shown == ""


@pytest.mark.process
def test_a_rewind_at_a_terminal_shows_the_plan_then_asks(till: Till, folder: Path) -> None:
    first = attach(till, folder)
    (folder / "a.txt").write_text("changed")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "rewind", first[:8]],
        cwd=till.cwd,
        env={**till.env(), "TERM": "xterm", "NO_COLOR": "1"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    shown = b""
    while b"Proceed? [y/N]" not in shown:
        shown += os.read(master, 65536)
    os.write(master, b"n\n")
    try:
        while chunk := os.read(master, 65536):
            shown += chunk
    except OSError:  # EIO: the other side closed
        pass
    os.close(master)
    assert proc.wait(timeout=120) == 1
    text = shown.decode()
    assert f"Rewinding to {first[:12]}" in text and "modified" in text
    assert "till rewind" not in text.split("Proceed?")[0]  # the prompt asks instead
    assert "not confirmed" in text
    assert (folder / "a.txt").read_text() == "changed"


@pytest.mark.process
def test_every_verb_answers_people_in_sentences_not_raw_fields(till: Till, folder: Path) -> None:
    first = attach(till, folder)
    (folder / "big.bin").write_bytes(os.urandom(200_000))
    pages = {
        "snap": run(till, "snap", "-m", "second"),
        "status": run(till, "status"),
        "status --fidelity": run(till, "status", "--fidelity"),
        "show": run(till, "show", first[:8]),
        "pin": run(till, "pin", first[:8]),
        "unpin": run(till, "unpin", first[:8]),
        "verify": run(till, "verify"),
        "watch": run(till, "watch", "--no-daemon"),
        "forget": run(till, "forget"),
    }
    for name, page in pages.items():
        assert page.code == 0, (name, page.stderr)
        text = page.stdout
        assert text.strip(), name
        assert not re.search(r": -$|\(none\)|: no$", text, re.MULTILINE), (name, text)
        without_ids = re.sub(r"\b[0-9a-f]{12,64}\b", "ID", text)
        assert not re.search(r"\b\d{5,}\b|\d{4}-\d\d-\d\dT", without_ids), (name, text)
    assert pages["status"].stdout.startswith("Workspace  ")
    assert "198 KiB" in pages["snap"].stdout  # 200,000 + 3,001 bytes
    assert pages["verify"].stdout.startswith("The store is sound")
    assert pages["forget"].stdout.startswith("Forgot ")


@pytest.mark.process
def test_a_slow_rewind_shows_its_stages_on_a_terminal(till: Till, folder: Path) -> None:
    make_files(folder, 40)
    first = attach(till, folder)
    for i in range(40):
        (folder / f"f{i:03}.txt").unlink()
    shown = on_a_terminal(till, [sys.executable, "-c", SLOW, "rewind", first, "--yes"])
    assert "\rapplying  " in shown and "/40 files" in shown
    assert "ETA " in shown
    assert shown.endswith("\n")
    assert (folder / "f000.txt").exists()


def test_forks_and_a_session_log_render_in_colour(till: Till, folder: Path) -> None:
    attach(till, folder)
    till.json("fork", "one")
    till.json("session", "start", "s1", "-m", "task")
    (folder / "b.txt").write_text("changed")
    till.json("session", "record", "s1", "-m", "step")
    for args in (("forks",), ("session", "log", "s1")):
        shown = till("--color", "always", *args)
        assert shown.code == 0 and shown.stderr == "", (args, shown.stderr)
        assert ANSI in shown.stdout and "\\x1b" not in shown.stdout
        plain = till("--color", "never", *args)
        assert plain.stdout == re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout)


def test_events_in_colour_are_painted_not_shown_as_escapes(till: Till, folder: Path) -> None:
    attach(till, folder)
    till.json("snap", "-m", "a label\x1b[2J")  # an escape in a label is shown, not obeyed
    shown = till("--color", "always", "events").stdout
    assert "\x1b[33m" in shown  # the snapshot's short ID, painted
    assert "\\x1b[33m" not in shown and "\\x1b[0m" not in shown
    assert "a label\\x1b[2J" in shown and "\x1b[2J" not in shown


@pytest.mark.process
def test_a_seal_at_a_terminal_counts_toward_the_last_seals_files_with_an_eta(
    till: Till, folder: Path
) -> None:
    make_files(folder, 40)
    attach(till, folder)  # 42 files
    (folder / "f000.txt").write_text("changed")
    shown = on_a_terminal(till, [sys.executable, "-c", SLOW, "snap"])
    assert "/42 files" in shown and "ETA " in shown
    final = shown.rstrip("\r\n").rsplit("\r", 1)[-1]
    assert final.startswith("sealing  42/42 files  ") and "ETA" not in final


@pytest.mark.process
def test_a_tiny_stage_late_in_a_long_command_draws_nothing(till: Till, folder: Path) -> None:
    make_files(folder, 40)
    first = attach(till, folder)
    (folder / "f000.txt").write_text("changed")
    shown = on_a_terminal(till, [sys.executable, "-c", SLOW, "rewind", first, "--yes"])
    assert "staging" not in shown and "applying" not in shown  # one file: half a second each
    assert "\rsealing  " in shown  # the long walk before the rewind is shown


@pytest.mark.process
def test_forks_on_a_colour_terminal_is_a_page_not_an_internal_error(
    till: Till, folder: Path
) -> None:
    attach(till, folder)
    till.json("fork", "one")
    shown = on_a_terminal(till, [sys.executable, "-m", "tillage", "forks"], stdout=True)
    assert "internal error" not in shown
    assert ANSI in shown and "one" in shown and "till merge one" in shown
