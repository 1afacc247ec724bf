"""What the kill campaigns share: their seeds and rounds, their report, and how a scenario's
broken expectations are gathered and told (test_kill_campaign, test_universe_kill_campaign).

Under CI the seeds are fixed; locally they change per run unless TILLAGE_KILL_SEED is set (the
top conftest picks one per run and hands it to the xdist workers). TILLAGE_KILL_ROUNDS=n runs
n rounds with other pairings and seeds. TILLAGE_KILL_REPORT=path appends one JSON line per
scenario (where the kill landed, what was wrong), to see a campaign's coverage.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import Run
from tests.faults.harness import Manifest, manifest

ROUNDS = int(os.environ.get("TILLAGE_KILL_ROUNDS", "1"))
_SEED_ENV = os.environ.get("TILLAGE_KILL_SEED")
BASE_SEED = int(_SEED_ENV) if _SEED_ENV else 0 if os.environ.get("CI") else random.randrange(10**4)
REPORT = os.environ.get("TILLAGE_KILL_REPORT")


class KnownBugError(Exception):
    """Raised by a scenario whose only broken expectations are a bug already written down: a
    test marked `xfail(strict=True, raises=KnownBugError)` for it then fails again, as a
    plain assertion, the moment anything else breaks, and XPASSes (strict: a failure) once
    the bug is fixed."""


@dataclass
class Findings:
    """Every broken expectation of one scenario, each naming the command and the state; those
    of a bug already written down are kept apart (`known`)."""

    scenario: str
    landed: str = ""
    problems: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str, *, known: bool = False) -> bool:
        if not ok:
            (self.known if known else self.problems).append(what)
        return ok

    def report(self, **extra: Any) -> None:
        """Appends the scenario's line to TILLAGE_KILL_REPORT (when set)."""
        if REPORT:
            line = {
                "scenario": self.scenario,
                "landed": self.landed,
                **extra,
                "problems": self.problems,
                "known": self.known,
            }
            with open(REPORT, "a") as f:
                f.write(json.dumps(line) + "\n")

    def done(self) -> None:
        self.report()
        self.raise_if_broken()

    def raise_if_broken(self) -> None:
        assert not self.problems, f"{self.scenario} (kill landed {self.landed}):\n- " + (
            "\n- ".join(self.problems)
        )
        if self.known:
            raise KnownBugError(f"{self.scenario}:\n- " + "\n- ".join(self.known))


def answered(found: Findings, run: Run, command: str) -> dict[str, Any] | None:
    """Checks `run` answered one JSON result or a structured, non-internal error (exit 0/1)."""
    where = f"`till {command}`"
    found.check("Traceback" not in run.stderr, f"{where} printed a traceback: {run.stderr[-800:]}")
    if not found.check(run.code in (0, 1), f"{where} exited {run.code}: {run.stderr[-800:]}"):
        return None
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        found.check(False, f"{where} printed no JSON document: {run.stdout[:300]!r}")
        return None
    if run.code == 1:
        error = doc.get("error") if isinstance(doc, dict) else None
        shown = json.dumps(error)[:500]
        if not isinstance(error, dict) or error.get("name") in (None, "internal"):
            found.check(False, f"{where} answered no structured error: {shown}")
        else:  # a structured error, but nothing in these scenarios should make it fail
            found.check(False, f"{where} failed where it should succeed: {shown}")
        return None
    return doc if isinstance(doc, dict) else None


def folder_state(folder: Path, states: dict[str, Manifest]) -> str:
    """Names the state the folder is in ('mixed' when it is none of them)."""
    now = manifest(folder)
    for name, expected in states.items():
        if now == expected:
            return name
    return "mixed"


def describe_difference(folder: Path, expected: Manifest) -> str:
    now = manifest(folder)
    differ = sorted(p for p in set(now) | set(expected) if now.get(p) != expected.get(p))
    return f"{len(differ)} paths differ, e.g. {differ[:5]}"
