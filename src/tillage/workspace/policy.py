"""`.tillagepolicy`: gitignore-syntax patterns for subtrees tillage must not capture or touch,
and `@class NAME PATTERN` lines that set the content class of the paths a pattern names.

The policy file itself is captured. `.tillage/` at the root is always excluded, and so are the
temporary files tillage itself writes during a rewind. A line that is not a valid pattern (or
a `@class` line with an unknown class or no pattern) is skipped and reported (file and line),
never fatal: one typo must not block sealing or recovery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tillage.core.classes import ClassRules, is_class_line
from tillage.platform.fs import TEMP_MARK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.core.models import Entry
    from tillage.store.store import Store

POLICY_FILE = ".tillagepolicy"


@dataclass(frozen=True)
class PolicyProblem:
    """A policy line that was skipped, and why."""

    file: str
    line: int
    text: str
    problem: str


class Policy:
    """Answers whether a workspace path is excluded from capture (and so from rewind), and
    which `@class` rules set content classes (`classes`)."""

    def __init__(self, lines: list[str]) -> None:
        self._spec: Any = None
        self.problems: tuple[PolicyProblem, ...] = ()
        self.classes: ClassRules = ClassRules.EMPTY
        if any(is_class_line(line) for line in lines):
            self.classes = ClassRules.parse(lines)
            # a `@class` line is no exclusion pattern: blank it, keeping the line numbers
            lines = ["" if is_class_line(line) else line for line in lines]
        class_problems = tuple(
            PolicyProblem(POLICY_FILE, p.line, p.text, p.problem) for p in self.classes.problems
        )
        self.problems = class_problems
        if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
            return
        import pathspec

        try:
            self._spec = pathspec.GitIgnoreSpec.from_lines(lines)
        except Exception:  # pathspec raises its own and re's errors: parse line by line
            self._spec, pattern_problems = _parse_lenient(lines)
            self.problems = tuple(
                sorted((*class_problems, *pattern_problems), key=lambda p: p.line)
            )

    @classmethod
    def from_bytes(cls, data: bytes) -> Policy:
        """A policy from a `.tillagepolicy` file's bytes (e.g. as a snapshot holds it)."""
        return cls(data.decode("utf-8", errors="surrogateescape").splitlines())

    @classmethod
    def load(cls, root: Path) -> Policy:
        try:
            data = (root / POLICY_FILE).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return cls([])
        return cls.from_bytes(data)

    @property
    def empty(self) -> bool:
        """True when the policy excludes nothing but tillage's own temporary files."""
        return self._spec is None

    def excludes(self, path: str, is_dir: bool) -> bool:
        """Tells whether `path` (workspace-relative) is excluded."""
        if TEMP_MARK in path.rsplit("/", 1)[-1]:
            return True
        if self._spec is None:
            return False
        return bool(self._spec.match_file(path + "/" if is_dir else path))


def _parse_lenient(lines: list[str]) -> tuple[Any, tuple[PolicyProblem, ...]]:
    """Compiles the valid lines, in order (negations depend on it), and reports the rest."""
    import pathspec

    good: list[str] = []
    problems: list[PolicyProblem] = []
    for number, line in enumerate(lines, start=1):
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            problems.append(PolicyProblem(POLICY_FILE, number, line[:200], reason[:200]))
            continue
        good.append(line)
    spec = pathspec.GitIgnoreSpec.from_lines(good) if good else None
    return spec, tuple(problems)


def snapshot_policy(store: Store, manifest: Mapping[str, Entry]) -> Policy:
    """The policy a snapshot was sealed under: its own `.tillagepolicy`, bad lines skipped."""
    from tillage.core.models import EntryKind
    from tillage.workspace.trees import read_file_bytes

    entry = manifest.get(POLICY_FILE)
    if entry is None or entry.kind is not EntryKind.FILE:
        return Policy([])
    return Policy.from_bytes(read_file_bytes(store, entry))


def outside_policy(manifest: Mapping[str, Entry], policy: Policy) -> dict[str, Entry]:
    """Returns `manifest` without the paths `policy` excludes (and everything below them).

    A rewind plans against this: a snapshot knows nothing of what its policy excluded, so a
    rewind must not touch those paths, whatever the live policy says now.
    """
    from tillage.core.models import EntryKind

    if policy.empty:
        return dict(manifest)
    kept: dict[str, Entry] = {}
    dropped: set[str] = set()
    for path in sorted(manifest, key=lambda p: p.count("/")):  # parents before children
        parent = path.rpartition("/")[0]
        entry = manifest[path]
        if parent in dropped or policy.excludes(path, entry.kind is EntryKind.DIR):
            dropped.add(path)
            continue
        kept[path] = entry
    return kept
