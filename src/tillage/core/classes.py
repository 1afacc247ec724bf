"""Content classes: what kind of bytes a workspace path holds, so gc can keep each kind as long
as it is worth keeping.

Every path has one class of CLASSES. Source, vcs, config and lockfile bytes live as long as
their snapshot; database, dependency, build and scratch bytes only for their BYTE_WINDOWS
after the snapshot's seal (they are big, churn, and can be rebuilt or re-downloaded).

A path's class comes from, in order: the last `@class NAME PATTERN` line of the
`.tillagepolicy` whose pattern matches it or a folder above it (gitignore-like: a pattern with
no `/` but a trailing one matches a name at any depth, a trailing `/` only folders; `*`, `?`,
`[...]`, `**`); else its place (the first folder from the root that names one: `.git/` is vcs,
`node_modules/` dependency, `target/` build, `.cache/` scratch ...); else its name (`*.sqlite`
database, `Cargo.lock` lockfile, `*.toml` config, `*.pyc` build, `*.swp` scratch); else source.

Pure and fast: gc asks for every path of every old snapshot, so the defaults are a few dict
lookups per path and a ClassRules memoizes its answers per folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from tillage.core import globs
from tillage.core.units import DAY

CLASSES = ("source", "vcs", "config", "lockfile", "database", "dependency", "build", "scratch")
_CLASS_SET = frozenset(CLASSES)
_NS_PER_DAY = DAY * 1_000_000_000

BYTE_WINDOWS: Mapping[str, int | None] = MappingProxyType(
    {
        "source": None,
        "vcs": None,
        "config": None,
        "lockfile": None,
        "database": 30 * _NS_PER_DAY,
        "dependency": 3 * _NS_PER_DAY,
        "build": 3 * _NS_PER_DAY,
        "scratch": 1 * _NS_PER_DAY,
    }
)

# -- defaults ----------------------------------------------------------------------------------

# Folder names that make everything below them one class (exact names, any depth).
_PLACES: dict[str, str] = {
    **dict.fromkeys((".git", ".hg", ".svn", ".jj", ".bzr", "_darcs", ".pijul"), "vcs"),
    **dict.fromkeys(
        (
            "node_modules",
            ".venv",
            "venv",
            "bower_components",
            "jspm_packages",
            "site-packages",
            "dist-packages",
            "__pypackages__",
            ".tox",
            ".nox",
            ".eggs",
            ".pnpm-store",
            ".yarn",
            "elm-stuff",
        ),
        "dependency",
    ),
    **dict.fromkeys(
        (
            "target",
            "dist",
            "build",
            "out",
            "_build",
            ".build",
            "__pycache__",
            ".next",
            ".nuxt",
            ".svelte-kit",
            ".output",
            ".dart_tool",
            "htmlcov",
            "cmake-build-debug",
            "cmake-build-release",
        ),
        "build",
    ),
    **dict.fromkeys(
        (
            ".cache",
            "tmp",
            ".tmp",
            ".pytest_cache",
            ".mypy_cache",
            ".ruff_cache",
            ".hypothesis",
            ".ipynb_checkpoints",
            ".sass-cache",
            ".parcel-cache",
            ".turbo",
            ".gradle",
            ".nyc_output",
            ".angular",
            ".eslintcache",
        ),
        "scratch",
    ),
}
_PLACE_SUFFIXES = ((".egg-info", "build"),)  # `tillage.egg-info/`

# Whole file names (exact), checked before extensions (`Thumbs.db` is scratch, not a database).
_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "package-lock.json",
            "npm-shrinkwrap.json",
            "yarn.lock",
            "pnpm-lock.yaml",
            "bun.lockb",
            "deno.lock",
            "Cargo.lock",
            "poetry.lock",
            "Pipfile.lock",
            "pdm.lock",
            "uv.lock",
            "Gemfile.lock",
            "composer.lock",
            "go.sum",
            "flake.lock",
            "mix.lock",
            "pubspec.lock",
            "Podfile.lock",
            "packages.lock.json",
            "gradle.lockfile",
            "requirements.lock",
        ),
        "lockfile",
    ),
    **dict.fromkeys(
        (
            ".tillagepolicy",
            ".gitignore",
            ".gitattributes",
            ".gitmodules",
            ".editorconfig",
            ".dockerignore",
            ".npmrc",
            ".nvmrc",
            ".python-version",
            ".tool-versions",
            ".prettierrc",
            ".envrc",
            "Dockerfile",
            "Makefile",
            "Procfile",
        ),
        "config",
    ),
    **dict.fromkeys((".DS_Store", "Thumbs.db", "desktop.ini", ".coverage"), "scratch"),
    **dict.fromkeys((".git", ".hg", ".jj"), "vcs"),  # a worktree's or submodule's link file
}
# Extensions (lowered, after the last dot).
_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys(("sqlite", "sqlite3", "db", "db3", "s3db", "sl3", "duckdb", "mdb"), "database"),
    "lock": "lockfile",
    **dict.fromkeys(
        ("toml", "yaml", "yml", "ini", "cfg", "conf", "json", "properties", "env"), "config"
    ),
    **dict.fromkeys(("pyc", "pyo", "o", "obj", "class", "elc", "tsbuildinfo"), "build"),
    **dict.fromkeys(("tmp", "temp", "swp", "swo", "log", "bak"), "scratch"),
}
_SIDECARS = ("-wal", "-shm", "-journal")  # SQLite's files beside a database


def _default_place(name: str) -> str | None:
    cls = _PLACES.get(name)
    if cls is None:
        for suffix, suffix_cls in _PLACE_SUFFIXES:
            if name.endswith(suffix):
                return suffix_cls
    return cls


def _default_name(name: str) -> str:
    """The class a file's name alone gives it (no place, no rule)."""
    cls = _NAMES.get(name)
    if cls is not None:
        return cls
    if name.startswith(".env"):
        return "config"
    if name.endswith("~"):
        return "scratch"
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:  # no extension, or a plain dotfile like `.bashrc`
        return "source"
    ext = ext.lower()
    for sidecar in _SIDECARS:
        if ext.endswith(sidecar):
            base = ext[: -len(sidecar)]
            return "database" if _EXTENSIONS.get(base) == "database" else "source"
    return _EXTENSIONS.get(ext, "source")


# -- rules from the policy -----------------------------------------------------------------------


@dataclass(frozen=True)
class ClassProblem:
    """A `@class` line that was skipped, and why (line numbers count from 1 in `lines`)."""

    line: int
    text: str
    problem: str


@dataclass(frozen=True)
class ClassRule:
    """One `@class NAME PATTERN` line: `regex` matches a path that the pattern names or that
    lies below a folder it names, in the form `path` (a file) or `folder/` (a folder)."""

    cls: str
    pattern: str
    regex: re.Pattern[str]
    # The pattern's segments (None for `**`), for asking what it can match below a folder.
    segments: tuple[re.Pattern[str] | None, ...]


PREFIX = "@class"


def _charset_regex(chars: globs.CharSet) -> str:
    if not chars.negated and len(chars.ranges) == 1 and chars.ranges[0][0] == chars.ranges[0][1]:
        return re.escape(chr(chars.ranges[0][0]))
    body = "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
        for lo, hi in chars.ranges
    )
    if chars.negated:
        return f"[^/{body}]" if body else "[^/]"
    return f"(?!/)[{body}]"


def _segment_regex(segment: globs.Segment) -> str:
    return "".join("[^/]*" if item.star else _charset_regex(item.chars) for item in segment)


def compile_pattern(pattern: str) -> tuple[re.Pattern[str], tuple[re.Pattern[str] | None, ...]]:
    """Compiles a gitignore-like class pattern into a regex over `path` or `folder/` that also
    matches everything below what the pattern names, and one regex per segment (None for
    `**`); raises globs.BadPatternError."""
    text = pattern.strip()
    folder_only = text.endswith("/")
    text = text.rstrip("/")
    anchored = "/" in text
    text = text.lstrip("/")
    parsed = globs.parse(text)
    if not anchored and parsed[0] is not None:
        parsed = (None, *parsed)
    out = ""
    for position, segment in enumerate(parsed):
        last = position == len(parsed) - 1
        if segment is None:
            # `**`: any run of whole segments (none included), so `a/**/b` matches `a/b`
            out += ".*" if last else "(?:[^/]*/)*"
        else:
            out += _segment_regex(segment) + ("" if last else "/")
    below = "/.*" if folder_only else "(?:/.*)?"
    if parsed[-1] is None:
        below = "" if not folder_only else "/.*"
        # `a/**` names what is inside `a`, never `a` itself: at least one more segment
        out = out[: -len(".*")] + "[^/].*" if out.endswith(".*") else out
    segments = tuple(
        None if seg is None else re.compile(_segment_regex(seg), re.DOTALL) for seg in parsed
    )
    return re.compile(f"{out}{below}", re.DOTALL), segments


class ClassRules:
    """The `@class NAME PATTERN` lines of one `.tillagepolicy`, in order (the last match wins).

    Memoizes per folder: gc asks about the same folders once per snapshot.
    """

    EMPTY: ClassVar[ClassRules]
    _MEMO_LIMIT = 100_000

    def __init__(self, rules: Sequence[ClassRule], problems: Sequence[ClassProblem] = ()) -> None:
        self.rules: tuple[ClassRule, ...] = tuple(rules)
        self.problems: tuple[ClassProblem, ...] = tuple(problems)
        self._folder_memo: dict[str, str | None] = {}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __repr__(self) -> str:
        return f"ClassRules({[(r.cls, r.pattern) for r in self.rules]!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClassRules):
            return NotImplemented
        return [(r.cls, r.pattern) for r in self.rules] == [(r.cls, r.pattern) for r in other.rules]

    def __hash__(self) -> int:
        return hash(tuple((r.cls, r.pattern) for r in self.rules))

    @classmethod
    def of_policy(cls, data: bytes) -> ClassRules:
        """The rules of a `.tillagepolicy` file's bytes, decoded as the policy decodes them
        (for a snapshot's own policy, read from the store)."""
        return cls.parse(data.decode("utf-8", errors="surrogateescape").splitlines())

    @classmethod
    def parse(cls, lines: Sequence[str]) -> ClassRules:
        """Reads the `@class` lines among `lines` (others are ignored: they are exclusion
        patterns); a bad one (unknown class, no pattern, bad glob) is skipped and kept in
        `.problems`. The same lines give the same (shared) rules, so gc reading one policy
        in many snapshots compiles it once and keeps one memo of its folders."""
        key = tuple((n, line) for n, line in enumerate(lines, start=1) if is_class_line(line))
        if not key:
            return cls.EMPTY
        cached = _PARSED.get(key)
        if cached is not None:
            return cached
        rules: list[ClassRule] = []
        problems: list[ClassProblem] = []
        for number, line in key:
            rule_or_problem = parse_line(line)
            if isinstance(rule_or_problem, ClassRule):
                rules.append(rule_or_problem)
            else:
                problems.append(ClassProblem(number, line[:200], rule_or_problem))
        parsed = cls(rules, problems)
        if len(_PARSED) >= 64:
            _PARSED.clear()
        _PARSED[key] = parsed
        return parsed

    def rule_for(self, path: str, folder: bool = False) -> str | None:
        """The class the last matching rule gives `path` (a file, or a folder when `folder`),
        or None when no rule matches it or a folder above it."""
        if not self.rules:
            return None
        subject = path + "/" if folder else path
        for rule in reversed(self.rules):
            if rule.regex.fullmatch(subject):
                return rule.cls
        return None

    def folder_class(self, folder: str) -> str | None:
        """The class every file below `folder` gets, or None when it depends on the file
        (memoized: see place_class)."""
        memo = self._folder_memo
        if folder in memo:
            return memo[folder]
        answer = self._folder_class(folder)
        if len(memo) >= self._MEMO_LIMIT:
            memo.clear()
        memo[folder] = answer
        return answer

    def _folder_class(self, folder: str) -> str | None:
        by_place = _default_folder_class(folder)
        if not self.rules:
            return by_place
        winner = None
        for index in range(len(self.rules) - 1, -1, -1):
            if self.rules[index].regex.fullmatch(folder + "/"):
                winner = index
                break
        cls = by_place if winner is None else self.rules[winner].cls
        if cls is None:
            return None
        # Any later rule (or any rule at all, when a default place decided) that could name a
        # path below this folder makes the answer depend on the file.
        later = self.rules if winner is None else self.rules[winner + 1 :]
        for rule in later:
            if rule.cls != cls and _could_match_below(rule, folder):
                return None
        return cls


def _could_match_below(rule: ClassRule, folder: str) -> bool:
    """Tells whether `rule` may match some path strictly below `folder` (exact up to globs
    that no name can satisfy, where it says yes): runs the pattern's segments over the
    folder's names and asks whether it is still alive after them."""
    states = _skip_stars(rule.segments, {0})
    for name in folder.split("/"):
        nxt: set[int] = set()
        for state in states:
            if state == len(rule.segments):
                continue
            segment = rule.segments[state]
            if segment is None:
                nxt.add(state)
            elif segment.fullmatch(name):
                nxt.add(state + 1)
        states = _skip_stars(rule.segments, nxt)
        if not states:
            return False
    # Either a segment is left for a deeper name, or the pattern named `folder` itself (and
    # so everything below it).
    return bool(states)


def _skip_stars(segments: tuple[re.Pattern[str] | None, ...], states: set[int]) -> set[int]:
    """Adds the states reached by letting a `**` match no segment."""
    out = set(states)
    stack = list(states)
    while stack:
        state = stack.pop()
        if state < len(segments) and segments[state] is None and state + 1 not in out:
            out.add(state + 1)
            stack.append(state + 1)
    return out


def is_class_line(line: str) -> bool:
    """Tells whether a policy line is a `@class` rule rather than an exclusion pattern."""
    stripped = line.lstrip()
    return stripped.startswith(PREFIX) and stripped[len(PREFIX) : len(PREFIX) + 1] in (
        "",
        " ",
        "\t",
    )


def parse_line(line: str) -> ClassRule | str:
    """Parses one `@class NAME PATTERN` line into a rule, or returns why it is not one."""
    fields = line.strip().split(None, 2)
    if len(fields) < 2:
        return f"`@class` needs a class name ({', '.join(CLASSES)}) and a pattern"
    name = fields[1]
    if name not in _CLASS_SET:
        return f"unknown class {name[:40]!r}: use one of {', '.join(CLASSES)}"
    if len(fields) < 3 or not fields[2].strip():
        return f"`@class {name}` needs a pattern, such as `@class {name} data/**`"
    pattern = fields[2].strip()
    if not pattern.strip("/"):
        return f"{pattern!r} names no path"
    if pattern.startswith("!"):
        return (
            "a `!` (negation) means nothing in a `@class` line: add a later line giving "
            "those paths the class they should have"
        )
    try:
        regex, segments = compile_pattern(pattern)
    except globs.BadPatternError as exc:  # its words are about claims; these are classes
        return str(exc).replace("claim pattern", "class pattern")[:200]
    return ClassRule(name, pattern, regex, segments)


ClassRules.EMPTY = ClassRules(())
_PARSED: dict[tuple[tuple[int, str], ...], ClassRules] = {}


# -- classifying ---------------------------------------------------------------------------------

_DEFAULT_FOLDER_MEMO: dict[str, str | None] = {}


def _default_folder_class(folder: str) -> str | None:
    """The class of the first folder from the root of `folder` that names a place, or None."""
    cached = _DEFAULT_FOLDER_MEMO.get(folder, "")
    if cached != "":
        return cached
    # Up to the nearest folder known (or the root), then down again: no recursion, so a
    # folder 2,000 levels deep costs a loop, not a RecursionError.
    chain = [folder]
    parent = folder.rpartition("/")[0]
    answer: str | None = None
    while parent:
        known = _DEFAULT_FOLDER_MEMO.get(parent, "")
        if known != "":
            answer = known
            break
        chain.append(parent)
        parent = parent.rpartition("/")[0]
    if len(_DEFAULT_FOLDER_MEMO) + len(chain) >= 100_000:
        _DEFAULT_FOLDER_MEMO.clear()
    for step in reversed(chain):  # outermost first
        if answer is None:
            answer = _default_place(step.rpartition("/")[2])
        _DEFAULT_FOLDER_MEMO[step] = answer
    return answer


def place_class(dir_path: str, rules: ClassRules = ClassRules.EMPTY) -> str | None:
    """The class every path below the folder `dir_path` gets, so gc can treat a whole
    `node_modules/` at once; None when it depends on each name (look at each file)."""
    if not dir_path:
        return None
    return rules.folder_class(dir_path)


def class_of(path: str, rules: ClassRules = ClassRules.EMPTY) -> str:
    """The class of the file at `path` (workspace-relative, `/`-separated): a policy rule
    first, then its place, then its name, else `source`."""
    folder, _, name = path.rpartition("/")
    if rules.rules:
        by_rule = rules.rule_for(path)
        if by_rule is not None:
            return by_rule
    if folder:
        by_place = _default_folder_class(folder)
        if by_place is not None:
            return by_place
    return _default_name(name)
