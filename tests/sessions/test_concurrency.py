"""Concurrent `session record`s from several processes form one linear chain: the workspace
lock serialises reading a session's newest commit and publishing the next."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.sessions.conftest import commit_of, log_of

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

WRITERS = 6
ROUNDS = 3


def test_concurrent_records_form_one_linear_chain(till: Till, project: Path) -> None:
    base = commit_of(till, "start", "shared")
    answered = set()
    for round_ in range(ROUNDS):
        procs = []
        for n in range(WRITERS):
            script = (
                f"from pathlib import Path; Path('w{n}.txt').write_text('{round_}' * {n + 1})\n"
                "import sys\nfrom tillage.hosts.cli.main import main\n"
                f"sys.exit(main(['--json', 'session', 'record', 'shared', '-m', 'w{n} r{round_}']))"
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", script],
                    cwd=project,
                    env=till.env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, (out, err)
            answered.add(json.loads(out)["commit"]["id"])
    log = log_of(till, "shared")
    assert log[0]["id"] == base["id"]
    assert [c["is_baseline"] for c in log].count(True) == 1
    for before, after in itertools.pairwise(log):
        assert after["parent"] == before["id"]  # no two commits share a parent: no fork
    assert answered <= {c["id"] for c in log}
    assert len(log) >= 1 + ROUNDS  # every round changed something after the last commit
    # The newest commit holds every writer's last write.
    for n in range(WRITERS):
        run = till("cat", log[-1]["snapshot"], f"w{n}.txt")
        assert run.stdout == str(ROUNDS - 1) * (n + 1)
    assert till.json("sessions")["sessions"][0]["commits"] == len(log)
