"""The standard benchmark workload: a deterministic, realistic project folder.

The folder is meant to look like what a coding agent works in, because that is
what tillage seals: a nested source tree, a ``node_modules``-like tree of many
tiny files, a SQLite database, a large partly-compressible log, a real ``.git``
and a ``.env``.  At ``scale=1.0`` it holds about 5,000 files and 250 MiB.

Everything is drawn from a seeded :class:`random.Random`, so the same seed
gives the same file contents on every machine (the ``.git`` index and pack
layout are git's own business and may differ byte-wise; the tree they
describe does not).

Use :func:`generate` once, copy the result for every tool, then :func:`mutate`
each copy: it edits 100 source files, adds 10, deletes 10 and appends 4 MiB to
the log, and returns what it touched.

Run ``python bench/workload.py generate DIR`` to build one by hand and print
its statistics.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

MIB = 1024 * 1024

# Sizes and counts at scale 1.0, chosen so the total lands near 5,000 files
# and 250 MiB (see the module docstring of bench/run.py for why these parts).
SOURCE_FILES = 2800
SOURCE_MIN_BYTES = 200
SOURCE_MAX_BYTES = 40 * 1024
NODE_PACKAGES = 440
DB_BYTES = 40 * MIB
LOG_BYTES = 128 * MIB
LOG_APPEND_BYTES = 4 * MIB
GIT_LATE_FRACTION = 0.2  # share of source files that arrive in the second commit
GIT_REVISED_FILES = 100  # files whose older version lives in the git history

MUTATE_EDITS = 100
MUTATE_ADDS = 10
MUTATE_DELETES = 10

# Parts of the tree that mutate() never treats as "source".
SOURCE_ROOTS = ("src", "tests", "docs", "scripts")

_WORDS_TEXT = (
    "account action active adapter address agent alias alloc answer append apply "
    "archive array asset async attach audit author backend backup batch binary bind "
    "block body bucket buffer build bundle byte cache call cancel capture cell chain "
    "change channel check chunk claim class clean client clock close cluster codec "
    "column commit config connect context copy count cursor daemon data debug decode "
    "default delta depth detach device diff digest dirty dispatch document domain "
    "driver encode engine entry error event expire export extent fetch field filter "
    "flag flush folder fork format frame graph group guard handle hash header heap "
    "hook index inode input item journal key label layer lease level limit link list "
    "load local lock logger lookup manifest mapping marker match merge message meta "
    "metric mode module mount name node object offset option order origin output "
    "owner packet page parent parse patch path peer pending pipe plan pool port "
    "prefix probe process queue quota range reader record region remote render "
    "replica report request reset resolve result retry revision root route rule "
    "sample scan schema scope seal segment select server session shard signal "
    "snapshot socket source span stage state status store stream string symbol sync "
    "table target task tenant thread ticket timer token trace tree trigger tuple "
    "update upload user value vector version view volume watch window worker writer"
)
WORDS = tuple(_WORDS_TEXT.split())

_ERRORS_TEXT = (
    "ValueError KeyError RuntimeError TimeoutError PermissionError LookupError "
    "ConflictError IntegrityError NotFoundError"
)
ERRORS = tuple(_ERRORS_TEXT.split())

PY_LINES = (
    "    {v} = {a}.{m}({b}, {n})",
    "    {v} = self._{w}.get({s!r}, {n})",
    "    if {v} is None:",
    '        raise {E}(f"{t} {{{a}!r}}")',
    "    for {i} in range({n}):",
    "        {v}.{m}({i}, {b})",
    "    # {T}",
    "    {v}: list[{C}] = [{a} for {a} in {b} if {a}.{w}]",
    "    return {v}",
    "    logger.debug({s!r}, {a}, {b})",
    "    with self._{w}_lock:",
    "        self._{w}[{a}] = {v}",
    "    {v} += len({a}) * {n}",
    "    yield from self.{m}({a}, limit={n})",
    "    assert {v} >= 0, {s!r}",
    "    try:",
    "        {v} = await self.{m}({a})",
    "    except {E} as exc:",
    "        raise {E}({s!r}) from exc",
)
PY_HEADS = (
    "def {m}({a}: {C}, {b}: int = {n}) -> {C}:",
    "async def {m}(self, {a}: str, {b}: bytes | None = None) -> None:",
    "    def {m}(self, {a}: {C}) -> list[{C}]:",
    "class {C}({D}):",
    "@dataclass(frozen=True)\nclass {C}:",
)
TS_LINES = (
    "  const {v} = await {a}.{m}({b}, {n});",
    "  if (!{v}) {{ throw new {E}(`{t} ${{{a}}}`); }}",
    "  for (let {i} = 0; {i} < {n}; {i}++) {{ {v}.{m}({i}); }}",
    "  // {T}",
    "  this.{w}.set({s!r}, {v});",
    "  return {{ {a}, {b}, {w}: {n} }};",
    "  const {v}: {C}[] = {b}.filter(({a}) => {a}.{w} > {n});",
    "  {v} = {v} ?? this.{m}({a});",
    "  console.debug({s!r}, {a});",
)
TS_HEADS = (
    "export async function {m}({a}: {C}, {b}: number): Promise<{C}> {{",
    "export class {C} extends {D} {{",
    "  private {m}({a}: string, {b}?: {C}): void {{",
    "export interface {C} {{ {a}: string; {b}: number; {w}?: {D} }}",
)
GO_LINES = (
    "\t{v}, err := {a}.{C}({b}, {n})",
    '\tif err != nil {{\n\t\treturn nil, fmt.Errorf("{t}: %w", err)\n\t}}',
    "\tfor {i} := 0; {i} < {n}; {i}++ {{",
    "\t\t{v}.{C}({i})\n\t}}",
    "\t// {T}",
    "\t{v} := make(map[string]{C}, {n})",
    "\ts.{w}.Lock()\n\tdefer s.{w}.Unlock()",
    "\treturn {v}, nil",
)
GO_HEADS = (
    "func ({a} *{C}) {D}({b} context.Context, {v} int) (*{C}, error) {{",
    "type {C} struct {{\n\t{D} string\n\t{b} int64\n}}",
    "func {C}({a} []byte) ({D}, error) {{",
)
LANGS = {
    ".py": (PY_HEADS, PY_LINES, "", '"""{T}."""\n\nfrom __future__ import annotations\n\n'),
    ".ts": (TS_HEADS, TS_LINES, "}", "// {T}.\nimport {{ {C} }} from './{w}';\n\n"),
    ".go": (GO_HEADS, GO_LINES, "}", '// Package {w}: {T}.\npackage {w}\n\nimport "fmt"\n\n'),
}
EXTS = (".py", ".ts", ".go", ".md")
EXT_WEIGHTS = (0.45, 0.3, 0.15, 0.1)

_LOG_COMPONENTS_TEXT = (
    "http.server db.pool cache.lru auth.session queue.worker sync.remote scheduler "
    "mailer search.index billing"
)
LOG_COMPONENTS = tuple(_LOG_COMPONENTS_TEXT.split())
LOG_METHODS = ("GET", "GET", "GET", "POST", "PUT", "DELETE")
LOG_STATUS = (200, 200, 200, 200, 201, 204, 304, 400, 404, 409, 500)

MIT = """MIT License

Copyright (c) {year} {author}

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY.
"""


@dataclass
class WorkloadStats:
    """What generate() produced, so a run can print and record it."""

    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    parts: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Mutation:
    """What mutate() changed; paths are workspace-relative with '/' separators."""

    edited: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    appended_bytes: int = 0


class _Fields(dict[str, str]):
    """A format_map() mapping that draws each placeholder lazily from pools.

    Drawing only the fields a template uses keeps text generation fast enough
    to build ~60 MiB of source in a few seconds on a small machine.
    """

    def __init__(self, rng: random.Random, local: list[str], classes: list[str]) -> None:
        super().__init__()
        self.rng = rng
        self.local = local
        self.classes = classes

    def __missing__(self, key: str) -> str:
        if key in ("v", "a", "b", "w", "m"):
            return self.rng.choice(self.local)
        if key in ("C", "D"):
            return self.rng.choice(self.classes)
        return _SCALARS[key](self.rng)


def _words(rng: random.Random, lo: int, hi: int, sep: str = " ") -> str:
    """A few dictionary words joined by sep (comments, messages, keys)."""
    return sep.join(rng.choices(WORDS, k=rng.randint(lo, hi)))


_SCALARS: dict[str, Callable[[random.Random], str]] = {
    "i": lambda rng: rng.choice("ijkn"),
    "n": lambda rng: str(rng.randrange(4096) if rng.random() < 0.5 else rng.randrange(10)),
    "E": lambda rng: rng.choice(ERRORS),
    "s": lambda rng: _words(rng, 1, 3, sep="."),
    "t": lambda rng: _words(rng, 3, 9).capitalize(),
    "T": lambda rng: _words(rng, 3, 9).capitalize(),
}


def _identifier(rng: random.Random) -> str:
    """A snake_case name of one to three words, sometimes with a number."""
    name = "_".join(rng.choices(WORDS, k=rng.randint(1, 3)))
    return f"{name}{rng.randrange(2, 99)}" if rng.random() < 0.15 else name


def _class_name(rng: random.Random) -> str:
    """A CamelCase name of one to three words."""
    return "".join(w.capitalize() for w in rng.choices(WORDS, k=rng.randint(1, 3)))


def _file_pools(rng: random.Random) -> _Fields:
    """Per-file identifier pools: files differ the way real modules do."""
    local = [_identifier(rng) for _ in range(rng.randint(18, 40))]
    classes = [_class_name(rng) for _ in range(rng.randint(4, 10))]
    return _Fields(rng, local, classes)


def code_text(rng: random.Random, ext: str, size: int) -> str:
    """Code-like text of about `size` bytes (zstd -3 shrinks it roughly 4x)."""
    fields = _file_pools(rng)
    if ext == ".md":
        return _markdown(rng, fields, size)
    heads, lines, closer, preamble = LANGS[ext]
    parts = [preamble.format_map(fields)]
    total = len(parts[0])
    while total < size:
        block = [rng.choice(heads).format_map(fields)]
        block += [rng.choice(lines).format_map(fields) for _ in range(rng.randint(3, 14))]
        if closer:
            block.append(closer)
        text = "\n".join(block) + "\n\n"
        parts.append(text)
        total += len(text)
    return "".join(parts)[: max(size, SOURCE_MIN_BYTES)]


def _markdown(rng: random.Random, fields: _Fields, size: int) -> str:
    """Prose-like documentation with headings, lists and code spans."""
    parts = [f"# {fields['T']}\n\n"]
    total = len(parts[0])
    while total < size:
        kind = rng.random()
        if kind < 0.15:
            text = f"## {fields['T']}\n\n"
        elif kind < 0.4:
            text = "".join(f"- `{fields['m']}`: {fields['t']}.\n" for _ in range(4)) + "\n"
        else:
            text = " ".join(f"{fields['t']}." for _ in range(rng.randint(2, 5))) + "\n\n"
        parts.append(text)
        total += len(text)
    return "".join(parts)


def _source_size(rng: random.Random) -> int:
    """200 B - 40 KiB, slightly skewed towards large ones (mean about 21 KiB)."""
    span = SOURCE_MAX_BYTES - SOURCE_MIN_BYTES
    return SOURCE_MIN_BYTES + int(span * rng.random() ** 0.9)


def _pick_ext(rng: random.Random) -> str:
    """A file extension drawn with the EXT_WEIGHTS mix."""
    return rng.choices(EXTS, weights=EXT_WEIGHTS)[0]


def _source_dirs(rng: random.Random, count: int) -> list[str]:
    """A nested directory layout (depth 1-5) under the SOURCE_ROOTS."""
    dirs = list(SOURCE_ROOTS)
    while len(dirs) < count:
        parent = rng.choice(dirs)
        if parent.count("/") < 4:
            dirs.append(f"{parent}/{_identifier(rng)}")
    return sorted(set(dirs))


def _write(root: Path, rel: str, data: str | bytes, executable: bool = False) -> int:
    """Write one file (creating parents) and return its size."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    path.write_bytes(raw)
    if executable:
        path.chmod(0o755)
    return len(raw)


def _scaled(value: int, scale: float, floor: int = 1) -> int:
    """Scale a count or size, never below floor (keeps tiny smoke runs valid)."""
    return max(floor, int(value * scale))


def write_source_tree(root: Path, rng: random.Random, scale: float) -> tuple[list[str], int]:
    """The nested code tree; returns its relative paths and total bytes."""
    count = _scaled(SOURCE_FILES, scale, floor=MUTATE_EDITS + MUTATE_DELETES + 10)
    dirs = _source_dirs(rng, max(len(SOURCE_ROOTS), count // 17))
    paths: list[str] = []
    total = 0
    seen: set[str] = set()
    while len(paths) < count:
        ext = _pick_ext(rng)
        rel = f"{rng.choice(dirs)}/{_identifier(rng)}{ext}"
        if rel in seen:
            continue
        seen.add(rel)
        total += _write(root, rel, code_text(rng, ext, _source_size(rng)))
        paths.append(rel)
    return paths, total


def _package_json(rng: random.Random, name: str, deps: list[str]) -> str:
    """A package.json much like npm writes them."""
    doc = {
        "name": name,
        "version": f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 40)}",
        "description": _words(rng, 3, 10),
        "main": "index.js",
        "license": "MIT",
        "repository": {"type": "git", "url": f"https://example.invalid/{name}.git"},
        "dependencies": {d: f"^{rng.randint(1, 9)}.{rng.randint(0, 9)}.0" for d in deps},
    }
    return json.dumps(doc, indent=2) + "\n"


def _package_name(rng: random.Random) -> str:
    """An npm-style name, a quarter of them scoped."""
    base = "-".join(rng.choices(WORDS, k=rng.randint(1, 3)))
    return f"@{rng.choice(WORDS)}/{base}" if rng.random() < 0.25 else base


def _write_package(root: Path, rng: random.Random, base: str, name: str, nested: int) -> int:
    """One package dir (package.json, index.js, README.md, ...); returns bytes."""
    pkg = f"{base}/node_modules/{name}" if base else f"node_modules/{name}"
    deps = [_package_name(rng) for _ in range(rng.randint(0, 4))]
    total = _write(root, f"{pkg}/package.json", _package_json(rng, name, deps))
    total += _write(root, f"{pkg}/index.js", _js_module(rng, rng.randint(200, 4000)))
    total += _write(root, f"{pkg}/README.md", code_text(rng, ".md", rng.randint(300, 3000)))
    if rng.random() < 0.5:
        author = _class_name(rng)
        total += _write(
            root, f"{pkg}/LICENSE", MIT.format(year=rng.randint(2012, 2024), author=author)
        )
    for _ in range(rng.randint(0, 2) if rng.random() < 0.4 else 0):
        total += _write(
            root, f"{pkg}/lib/{_identifier(rng)}.js", _js_module(rng, rng.randint(300, 6000))
        )
    for _ in range(nested):
        total += _write_package(root, rng, pkg, _package_name(rng), 0)
    return total


def _js_module(rng: random.Random, size: int) -> str:
    """A CommonJS module body of about `size` bytes."""
    body = code_text(rng, ".ts", size)
    return "'use strict';\n" + body + "\nmodule.exports = { " + _identifier(rng) + " };\n"


def write_node_modules(root: Path, rng: random.Random, scale: float) -> int:
    """Many tiny files in nested package dirs, plus .bin symlinks."""
    total = 0
    names: list[str] = []
    for _ in range(_scaled(NODE_PACKAGES, scale, floor=3)):
        name = _package_name(rng)
        if name in names:
            continue
        names.append(name)
        nested = rng.randint(1, 3) if rng.random() < 0.15 else 0
        total += _write_package(root, rng, "", name, nested)
    for name in names[:: max(1, len(names) // 20)][:20]:
        cli = f"node_modules/{name}/bin/cli.js"
        total += _write(
            root, cli, "#!/usr/bin/env node\nrequire('../index.js');\n", executable=True
        )
        link = root / "node_modules" / ".bin" / name.split("/")[-1]
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(f"../{name}/bin/cli.js")
    return total


def write_database(root: Path, rng: random.Random, scale: float) -> int:
    """A ~40 MiB SQLite file with three indexed tables, checkpointed to one file."""
    path = root / "data" / "app.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    target = _scaled(DB_BYTES, scale, floor=256 * 1024)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(
            """
            CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE, name TEXT,
                                created_at TEXT, bio TEXT);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id),
                                 total_cents INTEGER, status TEXT, created_at TEXT);
            CREATE TABLE events (id INTEGER PRIMARY KEY, user_id INTEGER, kind TEXT,
                                 payload TEXT, ts INTEGER);
            CREATE INDEX orders_by_user ON orders(user_id, created_at);
            CREATE INDEX events_by_kind ON events(kind, ts);
            """
        )
        users = max(100, target // 2000)
        with con:
            con.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", _user_rows(rng, users))
        next_id = 1
        while _db_size(con) < target:
            with con:
                con.executemany(
                    "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                    _order_rows(rng, next_id, 2000, users),
                )
                con.executemany(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                    _event_rows(rng, next_id, 4000, users),
                )
            next_id += 4000
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
    finally:
        con.close()
    return path.stat().st_size


def _db_size(con: sqlite3.Connection) -> int:
    """Bytes the database occupies (main file plus what the WAL still holds)."""
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    return int(pages) * int(page_size)


def _user_rows(rng: random.Random, count: int) -> Iterator[tuple[object, ...]]:
    for uid in range(1, count + 1):
        name = f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS).capitalize()}"
        email = f"{name.replace(' ', '.').lower()}.{uid}@example.invalid"
        yield (
            uid,
            email,
            name,
            _iso(rng.randrange(1_600_000_000, 1_700_000_000)),
            _words(rng, 5, 30),
        )


def _order_rows(
    rng: random.Random, start: int, count: int, users: int
) -> Iterator[tuple[object, ...]]:
    for oid in range(start, start + count):
        yield (
            oid,
            rng.randint(1, users),
            rng.randrange(100, 500_000),
            rng.choice(("new", "paid", "shipped", "refunded", "cancelled")),
            _iso(rng.randrange(1_600_000_000, 1_700_000_000)),
        )


def _event_rows(
    rng: random.Random, start: int, count: int, users: int
) -> Iterator[tuple[object, ...]]:
    for eid in range(start, start + count):
        payload = json.dumps(
            {
                "ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
                "session": f"{rng.getrandbits(64):016x}",
                "path": "/" + _words(rng, 1, 4, sep="/"),
                "items": [rng.randrange(10_000) for _ in range(rng.randint(0, 6))],
                "note": _words(rng, 0, 8),
            }
        )
        yield eid, rng.randint(1, users), rng.choice(WORDS), payload, 1_700_000_000 + eid


def _iso(epoch: int) -> str:
    """RFC 3339 UTC, seconds precision."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class _LogClock:
    """Monotonic log timestamps, formatting the seconds part once per second."""

    def __init__(self, epoch_ms: int) -> None:
        self.ms = epoch_ms
        self._second = -1
        self._prefix = ""

    def tick(self, rng: random.Random) -> str:
        self.ms += rng.randrange(0, 40)
        second, milli = divmod(self.ms, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._prefix}.{milli:03d}Z"


def log_lines(rng: random.Random, clock: _LogClock, size: int) -> Iterator[str]:
    """Application-log lines (about 3x compressible: random ids in fixed text)."""
    produced = 0
    while produced < size:
        ts = clock.tick(rng)
        comp = rng.choice(LOG_COMPONENTS)
        roll = rng.random()
        rid = f"{rng.getrandbits(64):016x}"
        if roll < 0.6:
            line = (
                f"{ts} INFO  [{comp}] request_id={rid} method={rng.choice(LOG_METHODS)} "
                f"path=/api/v1/{rng.choice(WORDS)}s/{rng.randrange(100000)} "
                f"status={rng.choice(LOG_STATUS)} duration_ms={rng.random() * 900:.1f} "
                f"trace={rng.getrandbits(128):032x} span={rng.getrandbits(64):016x}\n"
            )
        elif roll < 0.8:
            line = (
                f"{ts} DEBUG [{comp}] cache {rng.choice(('hit', 'miss'))} "
                f"key={rng.choice(WORDS)}:{rid} size={rng.randrange(1 << 20)} "
                f"etag={rng.getrandbits(96):024x}\n"
            )
        elif roll < 0.95:
            line = (
                f"{ts} WARN  [{comp}] retrying {rng.choice(WORDS)} job={rid} "
                f"attempt={rng.randint(1, 5)} backoff_ms={rng.randrange(5000)}\n"
            )
        else:
            line = (
                f"{ts} ERROR [{comp}] failed to {rng.choice(WORDS)} "
                f"{rng.choice(WORDS)} id={rng.randrange(10**6)} "
                f'err="{_words(rng, 3, 8)}" trace={rng.getrandbits(128):032x}\n'
            )
        produced += len(line)
        yield line


def _write_log(path: Path, rng: random.Random, clock: _LogClock, size: int, mode: str) -> int:
    """Stream log lines to path in ~1 MiB writes; returns bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    batch: list[str] = []
    batch_len = 0
    with path.open(mode, encoding="ascii") as fh:
        for line in log_lines(rng, clock, size):
            batch.append(line)
            batch_len += len(line)
            if batch_len >= MIB:
                fh.write("".join(batch))
                written += batch_len
                batch, batch_len = [], 0
        fh.write("".join(batch))
    return written + batch_len


def write_misc(root: Path, rng: random.Random) -> int:
    """.env, .gitignore and the project's top-level files."""
    secrets = "".join(
        f"{name}={rng.getrandbits(160):040x}\n"
        for name in ("SECRET_KEY", "API_TOKEN", "STRIPE_KEY", "SESSION_SALT")
    )
    env = "DATABASE_URL=sqlite:///data/app.db\nLOG_LEVEL=debug\nPORT=8080\n" + secrets
    total = _write(root, ".env", env)
    total += _write(root, ".gitignore", "node_modules/\n.env\nlogs/\ndata/\n*.log\n")
    total += _write(root, "README.md", code_text(rng, ".md", 6000))
    total += _write(root, "package.json", _package_json(rng, "bench-app", ["left-pad"]))
    total += _write(root, "pyproject.toml", '[project]\nname = "bench-app"\nversion = "0.1.0"\n')
    return total


def _git(root: Path, *args: str, date: str = "2024-01-01T00:00:00Z") -> None:
    """Run git in root with a fixed identity, date and no user config."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "Bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(var, None)
    cmd = ["git", "-c", "init.defaultBranch=main", "-c", "gc.auto=0", "-c", "pack.threads=1", *args]
    subprocess.run(cmd, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)


def _git_add(root: Path, paths: list[str]) -> None:
    """git add a long list of paths without hitting the argv limit."""
    listing = root / ".git" / "bench-pathspec"
    listing.write_text("\n".join(paths) + "\n")
    _git(root, "add", f"--pathspec-from-file={listing}")
    listing.unlink()


def write_git(root: Path, rng: random.Random, sources: list[str]) -> None:
    """A real repo of the source tree: three commits, then packed by git gc.

    Commit 1 holds most files (100 of them in an older revision), commit 2
    adds the rest, commit 3 lands the final revisions, so the pack holds real
    history and deltas, and the checkout ends equal to the generated tree.
    """
    order = sorted(sources)
    rng.shuffle(order)
    late_count = int(len(order) * GIT_LATE_FRACTION)
    late, early = order[:late_count], order[late_count:]
    revised = early[: min(GIT_REVISED_FILES, len(early) // 4)]
    finals = {rel: (root / rel).read_bytes() for rel in revised}
    for rel in revised:
        (root / rel).write_text(_revise(rng, finals[rel].decode(), Path(rel).suffix))
    _git(root, "init", "-q")
    top = [".gitignore", "README.md", "package.json", "pyproject.toml"]
    _git_add(root, top + early)
    _git(root, "commit", "-q", "-m", "Initial import", date="2024-01-01T00:00:00Z")
    _git_add(root, late)
    _git(root, "commit", "-q", "-m", "Add remaining modules", date="2024-01-02T00:00:00Z")
    for rel, data in finals.items():
        (root / rel).write_bytes(data)
    _git(root, "commit", "-q", "-a", "-m", "Revise modules", date="2024-01-03T00:00:00Z")
    _git(root, "gc", "-q")


def _revise(rng: random.Random, text: str, ext: str) -> str:
    """An edited version of a source file: a few lines replaced, a few inserted.

    Edits land in the middle of the file the way a person or an agent changes
    code, so tools that chunk by content can find the unchanged parts.
    """
    lines = text.split("\n")
    lang = LANGS.get(ext)
    fields = _file_pools(rng)
    fresh = [
        rng.choice(lang[1]).format_map(fields) if lang else f"{fields['t']}."
        for _ in range(rng.randint(3, 12))
    ]
    at = rng.randrange(len(lines))
    marker = "#" if ext == ".py" else "//"
    for offset in range(min(rng.randint(1, 3), len(lines) - at)):
        lines[at + offset] = f"{marker} edited: {fields['t']}"
    lines[at:at] = fresh
    return "\n".join(lines)


def count_tree(root: Path) -> tuple[int, int]:
    """(files, bytes) of regular files and symlinks under root, like a backup sees."""
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(dirpath, name)).st_size
    return files, size


def generate(root: Path, seed: int = 0, scale: float = 1.0) -> WorkloadStats:
    """Build the standard workload in root (which must be empty or absent).

    `scale` shrinks every part proportionally for smoke runs; results at a
    scale other than 1.0 are not comparable with the published targets.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ValueError(f"{root} is not empty")
    started = time.perf_counter()
    rng = random.Random(seed)
    sources, source_bytes = write_source_tree(root, rng, scale)
    node_bytes = write_node_modules(root, rng, scale)
    misc_bytes = write_misc(root, rng)
    db_bytes = write_database(root, random.Random(seed * 1_000_003 + 7), scale)
    clock = _LogClock(1_714_521_600_000 + seed * 86_400_000)
    log_bytes = _write_log(
        root / "logs" / "app.log",
        random.Random(seed * 1_000_003 + 11),
        clock,
        _scaled(LOG_BYTES, scale, floor=64 * 1024),
        "w",
    )
    write_git(root, random.Random(seed * 1_000_003 + 13), sources)
    stats = WorkloadStats(seconds=time.perf_counter() - started)
    stats.files, stats.bytes = count_tree(root)
    stats.parts = {
        "source": {"files": len(sources), "bytes": source_bytes},
        "node_modules": {"files": count_tree(root / "node_modules")[0], "bytes": node_bytes},
        "database": {"files": 1, "bytes": db_bytes},
        "log": {"files": 1, "bytes": log_bytes},
        "git": dict(zip(("files", "bytes"), count_tree(root / ".git"), strict=True)),
        "misc": {"files": 5, "bytes": misc_bytes},
    }
    return stats


def source_files(root: Path) -> list[str]:
    """Sorted relative paths of the source tree (what mutate() may touch)."""
    found: list[str] = []
    for top in SOURCE_ROOTS:
        for dirpath, _dirs, names in os.walk(root / top):
            rel_dir = Path(dirpath).relative_to(root).as_posix()
            found.extend(f"{rel_dir}/{name}" for name in names)
    return sorted(found)


def mutate(root: Path, seed: int = 1) -> Mutation:
    """The standard delta: edit 100 files, add 10, delete 10, append 4 MiB of log.

    Deterministic for a given generated tree and seed, so every tool's copy
    receives exactly the same change.
    """
    root = Path(root)
    rng = random.Random(seed)
    candidates = source_files(root)
    chosen = rng.sample(candidates, MUTATE_EDITS + MUTATE_DELETES)
    result = Mutation()
    for rel in sorted(chosen[:MUTATE_EDITS]):
        path = root / rel
        path.write_text(_revise(rng, path.read_text(), path.suffix))
        result.edited.append(rel)
    for rel in sorted(chosen[MUTATE_EDITS:]):
        (root / rel).unlink()
        result.deleted.append(rel)
    dirs = sorted({rel.rsplit("/", 1)[0] for rel in candidates})
    while len(result.added) < MUTATE_ADDS:
        ext = _pick_ext(rng)
        rel = f"{rng.choice(dirs)}/new_{_identifier(rng)}{ext}"
        if (root / rel).exists():
            continue
        _write(root, rel, code_text(rng, ext, _source_size(rng)))
        result.added.append(rel)
    result.added.sort()
    clock = _LogClock(1_900_000_000_000 + seed * 86_400_000)
    result.appended_bytes = _write_log(root / "logs" / "app.log", rng, clock, LOG_APPEND_BYTES, "a")
    return result


def main(argv: list[str] | None = None) -> int:
    """`generate DIR` / `mutate DIR`: build or change a workload and print stats."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("generate", "mutate"))
    parser.add_argument("root", type=Path)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.action == "generate":
        stats = generate(args.root, seed=args.seed or 0, scale=args.scale)
        print(json.dumps(asdict(stats), indent=2))
        print(
            f"{stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s",
            file=sys.stderr,
        )
    else:
        change = mutate(args.root, seed=1 if args.seed is None else args.seed)
        print(json.dumps(asdict(change), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
