"""Progress for a person at a terminal: one line per stage that takes long, with totals where
they are known, finished with the stage's final numbers; nothing for a short stage, nothing
under `--json` or on a pipe; and every long operation says what it is doing.

The printer is driven with a fake clock; the operations run through the real command line with
stderr said to be a terminal and the printer replaced by a recorder of what the engines report.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import Till
from tests.helpers import make_project

from tillage.core.progress import PAUSE, Meter, Progress
from tillage.hosts.cli import main
from tillage.hosts.cli.progress import ProgressPrinter
from tillage.workspace.pathindex import RACY_WINDOW_NS


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def printer() -> tuple[ProgressPrinter, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return ProgressPrinter(out, clock=clock, width=200), out, clock


def lines(out: io.StringIO) -> list[str]:
    """The lines a terminal shows at the end: each the last redraw before its newline."""
    return [chunk.rsplit("\r", 1)[-1].replace("\x1b[K", "") for chunk in out.getvalue().split("\n")]


# -- the printer -------------------------------------------------------------------------------


def test_a_short_stage_after_a_long_one_draws_nothing() -> None:
    show, out, clock = printer()
    for i in range(31):  # three seconds of sealing
        clock.t = i / 10
        show(Progress("sealing", i, 30, i * 1000, 0))
    clock.t = 3.1
    show(Progress("staging", 0, 1, 0, 12))
    clock.t = 3.2
    show(Progress("staging", 1, 1, 12, 12))
    show.finish()
    assert "staging" not in out.getvalue()
    assert lines(out) == ["sealing  30/30 files  29.3 KiB  9.8 KiB/s", ""]


def test_a_finished_line_shows_the_final_numbers_not_the_last_drawn() -> None:
    show, out, clock = printer()
    meter = Meter(show, "applying", 100, 100 * 1024)
    clock.t = 2.0
    meter.add(50, 50 * 1024)  # drawn: two seconds in
    clock.t = 2.05
    meter.add(50, 50 * 1024)  # within the redraw interval: not drawn yet
    assert "100/100" not in out.getvalue()
    show.finish()
    final = lines(out)[0]
    assert final.startswith("applying  100/100 files  100 KiB/100 KiB")
    assert "ETA" not in final  # the stage is over


def test_each_stage_that_took_long_keeps_its_own_finished_line() -> None:
    show, out, clock = printer()
    for stage, start in (("checking packs", 0.0), ("checking objects", 2.0)):
        tally = Meter(show, stage, 4, unit="object" if "objects" in stage else "pack")
        for i in range(4):
            clock.t = start + (i + 1) * 0.5
            tally.add()
    show.finish()
    assert lines(out) == ["checking packs  4/4 packs", "checking objects  4/4 objects", ""]


def test_a_pause_ends_the_line_before_a_command_prints() -> None:
    show, out, clock = printer()
    show(Progress("probe 1: 3f9a0c1d2e4b", 0, 10, 0, 0))
    clock.t = 1.5
    show(Progress("probe 1: 3f9a0c1d2e4b", 10, 10, 0, 0))
    show(PAUSE)
    assert out.getvalue().endswith("\n")  # the check's output starts on a line of its own
    clock.t = 1.6
    show(Progress("probe 2: 0a1b2c3d4e5f", 0, 10, 0, 0))  # short: nothing more is drawn
    show.finish()
    assert lines(out) == ["probe 1: 3f9a0c1d2e4b  10/10 files  0 B", ""]


def test_a_walk_that_meets_more_files_than_last_time_never_reads_past_its_total() -> None:
    seen: list[Progress] = []
    tally = Meter(seen.append, "sealing", 2)
    tally(3, 0)
    assert (seen[-1].files_done, seen[-1].files_total) == (3, 3)


# -- what the operations report ------------------------------------------------------------------


class Recorder:
    """Stands in for the printer: keeps every report, in order."""

    def __init__(self) -> None:
        self.reports: list[Progress] = []

    def __call__(self, p: Progress) -> None:
        self.reports.append(p)

    def finish(self) -> None:
        pass

    def stages(self) -> list[str]:
        names: list[str] = []
        for p in self.reports:
            if not names or names[-1] != p.stage:
                names.append(p.stage)
        return names

    def last(self, stage: str) -> Progress:
        return [p for p in self.reports if p.stage == stage][-1]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    shown = Recorder()
    monkeypatch.setattr(main, "_progress_printer", lambda: shown)
    yield shown


def at_a_terminal(
    till: Till, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Runs `till ARGS` in this process with stderr said to be a terminal."""
    out, err = io.BytesIO(), io.BytesIO()
    call = main.IO(
        cwd=str(cwd or till.cwd),
        env={**till.env(), **(env or {})},
        stdin=b"",
        stdout=out,
        stderr=err,
        stderr_tty=True,
    )
    code = main.run(list(args), call)
    return code, out.getvalue().decode(), err.getvalue().decode()


def attached(till: Till, folder: Path) -> None:
    make_project(folder)
    for i in range(30):
        (folder / f"f{i:02}.txt").write_text(f"file {i}\n" * 50)
    # A file changed (mtime or ctime) within RACY_WINDOW_NS of the seal that read it is read
    # again by the next seal (INV-8): the seal starts past that window, so what the next one
    # reads is only what changed, not a race with the clock.
    time.sleep(4 * RACY_WINDOW_NS / 1e9)
    till.json("watch", "--no-daemon")


def test_a_seal_counts_toward_the_files_the_last_seal_counted(
    till: Till, folder: Path, recorded: Recorder
) -> None:
    attached(till, folder)
    files = till.json("status")["head"]["files"]
    (folder / "f00.txt").write_text("changed\n")
    code, _out, _err = at_a_terminal(till, "snap")
    assert code == 0
    final = recorded.last("sealing")
    assert (final.files_done, final.files_total) == (files, files)
    assert final.bytes_done == len("changed\n")  # what was read: only the changed file
    assert recorded.stages() == ["sealing"]


def test_nothing_is_reported_under_json_or_when_stderr_is_no_terminal(
    till: Till, folder: Path, recorded: Recorder
) -> None:
    attached(till, folder)
    (folder / "f00.txt").write_text("changed\n")
    at_a_terminal(till, "--json", "snap")
    assert till("snap").code == 0  # stderr no terminal
    assert recorded.reports == []


def test_estimate_scans_and_seals_nothing(till: Till, folder: Path, recorded: Recorder) -> None:
    make_project(folder)
    assert at_a_terminal(till, "estimate")[0] == 0
    assert recorded.stages() == ["scanning"]


def test_verify_and_gc_report_their_stages(till: Till, folder: Path, recorded: Recorder) -> None:
    attached(till, folder)
    (folder / "f00.txt").write_text("changed\n")
    till.json("snap")
    assert at_a_terminal(till, "verify")[0] == 0
    assert recorded.stages() == ["checking packs", "checking objects", "checking snapshots"]
    objects = recorded.last("checking objects")
    assert objects.files_done == objects.files_total > 0 and objects.unit == "object"
    snapshots = recorded.last("checking snapshots")
    assert (snapshots.files_done, snapshots.files_total) == (2, 2)
    recorded.reports.clear()
    assert at_a_terminal(till, "gc", "--yes")[0] == 0
    marked = recorded.last("marking")
    assert marked.files_done == marked.files_total == 2 and marked.unit == "snapshot"


def test_a_fork_reports_its_copy(till: Till, folder: Path, recorded: Recorder) -> None:
    attached(till, folder)
    files = till.json("status")["head"]["files"]
    code, out, err = at_a_terminal(till, "fork", "one")
    assert code == 0, err
    copied = recorded.last("copying")
    made = re.search(r"(\d+) files", out)
    assert made is not None
    assert copied.files_done == int(made.group(1)) and copied.files_total >= copied.files_done
    assert copied.files_total == max(files, copied.files_done)
    assert "sealing" not in recorded.stages()  # the base seal beside it: one line, the copy's


def test_push_pull_and_clone_report_their_transfers(
    till: Till, folder: Path, tmp_path: Path, recorded: Recorder
) -> None:
    attached(till, folder)
    remote = tmp_path / "remote"
    key = till.json("remote", "add", str(remote))["key"]
    (folder / "f00.txt").write_text("changed\n")
    assert at_a_terminal(till, "sync", "--push")[0] == 0
    assert recorded.stages() == ["sealing", "uploading"]
    sent = recorded.last("uploading")
    assert sent.files_done == sent.files_total > 0 and sent.unit == "object"

    recorded.reports.clear()
    other = {"TILLAGE_HOME": str(tmp_path / "other-store")}  # another machine's: all fetched
    code, _out, err = at_a_terminal(
        till, "clone", str(remote), "copy", "--key", key, cwd=tmp_path, env=other
    )
    assert code == 0, err
    assert recorded.stages()[0] == "fetching" and "applying" in recorded.stages()
    fetched = recorded.last("fetching")
    assert fetched.files_done == fetched.files_total > 0
    written = recorded.last("applying")
    assert written.files_done == written.files_total > 0

    (folder / "f01.txt").write_text("changed again\n")
    till.json("sync", "--push")
    recorded.reports.clear()
    assert at_a_terminal(till, "sync", "--pull", cwd=tmp_path / "copy", env=other)[0] == 0
    stages = recorded.stages()
    assert stages[0] == "fetching" and "sealing" in stages and stages[-1] == "applying"


def test_each_bisect_probe_reports_its_folder_then_pauses_for_its_check(
    till: Till, folder: Path, recorded: Recorder
) -> None:
    attached(till, folder)
    first = till.json("snap", "-m", "good")["snapshot"]["id"]
    for i in range(4):
        (folder / f"step{i}.txt").write_text("x\n")
        till.json("snap")
    code, _out, err = at_a_terminal(till, "bisect", "--good", first, "--", "test ! -e step2.txt")
    assert code == 0, err
    probes = [s for s in recorded.stages() if s]
    assert probes and all(re.fullmatch(r"probe \d+: [0-9a-f]{12}", s) for s in probes)
    assert len({s.split(":")[0] for s in probes}) >= 3  # both ends, then the search
    # Every probe's reports end with a pause: its check's output starts on a line of its own.
    for n, p in enumerate(recorded.reports):
        if p.stage and (n + 1 == len(recorded.reports) or recorded.reports[n + 1].stage != p.stage):
            assert recorded.reports[n + 1] == PAUSE, (p, recorded.reports[n + 1 :][:2])


def test_a_fork_made_to_run_a_command_pauses_before_the_command_prints(
    till: Till, folder: Path, recorded: Recorder
) -> None:
    attached(till, folder)
    code, _out, err = at_a_terminal(till, "run", "two", "--", "true")
    assert code == 0, err
    assert recorded.stages()[-2:] == ["copying", ""]  # the copy, then the pause
    assert recorded.reports[-1] == PAUSE
