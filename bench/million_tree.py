"""A node_modules-like tree of N small files, built fast and deterministically (issue 26).

bench/million.py seals a million files; building them must not dominate the run on a 2-core
machine, so every file's bytes are a slice of text pools made once per seed and written with
one os.open/os.write/os.close: no per-file text generation, no pathlib, no buffered file
objects. The shape follows the tree the issue measured (1,001,431 files in 126,785 folders,
about 8 files per folder): packages with package.json, index.js, README.md, often a LICENSE,
a lib/ of modules (sometimes a sub-folder), some scoped (@scope/name), some with their own
nested node_modules/. By default the packages sit in the node_modules/ of many projects
(projects/pNNN/, a workspace monorepo: no folder holds more than FANOUT packages), because npm
never puts 40,000 packages in one folder; `--fanout 0` builds one flat node_modules/ instead,
which makes the widest folder hold about 2.5% of all files.

A stamp file (`STAMP`, one of the N files) records the size, seed and generator version, the
tree's statistics and a list of files in distinct folders for the benchmark to edit, so a
kept tree is reused only when it was built the same way and left clean.

    python bench/million_tree.py DIR [--files N] [--seed S] [--fanout F]  # prints its stamp
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAMP = ".bench-tree.json"
GENERATOR = 2  # bump when the shape or the bytes change: a kept tree is then rebuilt
FANOUT = 2000  # top-level packages per project's node_modules/ (0: one flat node_modules/)
CANDIDATES = 4096  # files in distinct folders offered to the benchmark's edits
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

_WORDS = (  # noqa: SIM905 (one word list, wrapped)
    "array async babel buffer cache chalk chunk color core debug deep define diff emit "
    "escape event fast file flat glob graph hash http iter json lodash loader map merge "
    "mime minimist node object once parse path picker plugin pretty promise proxy queue "
    "react read regex resolve rimraf semver shim signal slice sort source stream string "
    "style supports symbol tape text through token tree type util uuid visit walk which "
    "wrap yargs zip"
).split()
_SCOPES = ("babel", "types", "jest", "eslint", "webpack", "rollup", "vue", "aws-sdk")
_MIT = (
    "The MIT License (MIT)\n\nCopyright (c) {year} {who}\n\n"
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, "
    "merge, publish, distribute, sublicense, and/or sell copies of the Software.\n\n"
    'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.\n'
)


@dataclass
class _Pools:
    """Text made once per seed; every file is a header plus a slice of one of these."""

    js: str
    md: str
    licenses: list[bytes]

    @classmethod
    def make(cls, rng: random.Random) -> _Pools:
        js_lines = []
        for _ in range(6000):
            a, b, c = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
            js_lines.append(
                rng.choice(
                    (
                        f"const {a}{b.title()} = require('./{c}');",
                        f"function {a}{b.title()}({c}, opts) {{",
                        f"  if (!{c}) return {a}.{b}(opts || {{}});",
                        f"  var {a} = {c}.{b}[{rng.randrange(64)}] || null;",
                        f"  return {a}.map(function ({b}) {{ return {b}.{c}; }});",
                        "}",
                        f"module.exports.{a} = {a}{b.title()};",
                        f"// {a} {b} {c}: see https://github.com/{a}/{b}#{c}",
                        f"exports.{b} = function {c}() {{ return '{a}'; }};",
                    )
                )
            )
        md_lines = []
        for _ in range(2000):
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(4, 14)))
            md_lines.append(
                rng.choice((f"## {words}", f"- {words}", words.capitalize() + ".", "", "```"))
            )
        who = [f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()}" for _ in range(40)]
        licenses = [
            _MIT.format(year=2012 + n % 12, who=who[n % len(who)]).encode() for n in range(60)
        ]
        return cls("\n".join(js_lines) + "\n", "\n".join(md_lines) + "\n", licenses)


@dataclass
class _Builder:
    root: str
    limit: int
    rng: random.Random
    pools: _Pools
    files: int = 0
    folders: int = 0
    size: int = 0
    packages: int = 0
    projects: int = 0
    entries: dict[str, int] = field(default_factory=dict)  # node_modules folder -> entries
    per_folder: list[str] = field(default_factory=list)  # one file of each folder with files
    scopes: set[str] = field(default_factory=set)

    def full(self) -> bool:
        return self.files >= self.limit

    def mkdir(self, rel: str) -> bool:
        if self.full():
            return False
        os.mkdir(os.path.join(self.root, rel))
        self.folders += 1
        return True

    def write(self, rel: str, data: bytes) -> None:
        if self.full():
            return
        fd = os.open(os.path.join(self.root, rel), _FLAGS, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.files += 1
        self.size += len(data)
        folder = rel.rpartition("/")[0]
        if not self.per_folder or self.per_folder[-1].rpartition("/")[0] != folder:
            self.per_folder.append(rel)

    def text(self, pool: str, header: str) -> bytes:
        """The header, then 200 B - 4 KiB (log-uniform) of the pool from a random offset."""
        size = int(200 * 20 ** self.rng.random())
        start = self.rng.randrange(len(pool) - size)
        return (header + pool[start : start + size]).encode()

    def name(self) -> str:
        n = self.packages
        return f"{self.rng.choice(_WORDS)}-{self.rng.choice(_WORDS)}-{n:x}"

    def package(self, parent: str, depth: int) -> None:
        """One package under `parent` (a node_modules folder), and its nested packages."""
        self.packages += 1
        name = self.name()
        here = parent
        if self.rng.random() < 0.12:
            scope = f"@{self.rng.choice(_SCOPES)}"
            scope_rel = f"{parent}/{scope}"
            if scope_rel not in self.scopes:
                if not self.mkdir(scope_rel):
                    return
                self.scopes.add(scope_rel)
                self.entries[parent] = self.entries.get(parent, 0) + 1
            here = scope_rel
            name = f"{scope}/{name}"
        rel = f"{parent}/{name}"
        if not self.mkdir(rel):
            return
        self.entries[here] = self.entries.get(here, 0) + 1
        rng = self.rng
        deps = [self.name() for _ in range(rng.randrange(4))]
        meta: dict[str, Any] = {
            "name": name,
            "version": f"{rng.randrange(9)}.{rng.randrange(30)}.0",
        }
        meta |= {"main": "index.js", "license": "MIT", "dependencies": dict.fromkeys(deps, "^1")}
        self.write(f"{rel}/package.json", json.dumps(meta, indent=2).encode())
        self.write(f"{rel}/index.js", self.text(self.pools.js, f"/* {name} */\n"))
        self.write(f"{rel}/README.md", self.text(self.pools.md, f"# {name}\n\n"))
        if rng.random() < 0.75:
            self.write(f"{rel}/LICENSE", rng.choice(self.pools.licenses))
        if rng.random() < 0.35:
            self.write(f"{rel}/CHANGELOG.md", self.text(self.pools.md, f"# {name} changes\n"))
        if rng.random() < 0.4:
            self.write(f"{rel}/index.d.ts", self.text(self.pools.js, f"// types: {name}\n"))
        if rng.random() < 0.9 and self.mkdir(f"{rel}/lib"):
            for n in range(rng.randrange(7, 22)):
                self.write(f"{rel}/lib/m{n}.js", self.text(self.pools.js, f"// {name} {n}\n"))
            if rng.random() < 0.35:
                sub = f"{rel}/lib/{rng.choice(_WORDS)}"
                if self.mkdir(sub):
                    for n in range(rng.randrange(3, 13)):
                        self.write(f"{sub}/s{n}.js", self.text(self.pools.js, f"// {sub}\n"))
        if depth < 3 and rng.random() < 0.25 / (depth + 1) and self.mkdir(f"{rel}/node_modules"):
            for _ in range(rng.randrange(1, 5)):
                self.package(f"{rel}/node_modules", depth + 1)


def build(root: Path, files: int, seed: int, fanout: int = FANOUT) -> dict[str, Any]:
    """Write `files` files (the stamp included) under the empty or absent `root`; returns the
    stamp it wrote. With `fanout` > 0 the tree is a monorepo: projects/pNNN/ each with its own
    node_modules/ of at most `fanout` top-level packages; with 0, one flat node_modules/."""
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ValueError(f"{root} is not empty")
    rng = random.Random(seed)
    b = _Builder(str(root), max(1, files - 1), rng, _Pools.make(rng))
    b.folders = 1  # the root
    b.write("package.json", b'{"name": "bench-million", "private": true}\n')
    if fanout <= 0:
        b.mkdir("node_modules")
        while not b.full():
            b.package("node_modules", 0)
    else:
        b.mkdir("projects")
        while not b.full():
            project = f"projects/p{b.projects:03d}"
            b.projects += 1
            if not b.mkdir(project):
                break
            b.write(f"{project}/package.json", f'{{"name": "{project[9:]}"}}\n'.encode())
            if not b.mkdir(f"{project}/node_modules"):
                break
            for _ in range(fanout):
                b.package(f"{project}/node_modules", 0)
    pick = random.Random(seed + 1)
    candidates = b.per_folder[:: max(1, len(b.per_folder) // CANDIDATES)][:CANDIDATES]
    pick.shuffle(candidates)
    stamp = {
        "generator": GENERATOR,
        "files": b.files + 1,
        "seed": seed,
        "fanout": fanout,
        "folders": b.folders,
        "bytes": b.size,
        "packages": b.packages,
        "widest_folder": max(b.entries.values(), default=0),
        "clean": True,
        "edit_candidates": candidates,
    }
    write_stamp(root, stamp)
    return stamp


def write_stamp(root: Path, stamp: dict[str, Any]) -> None:
    """Replace the stamp atomically (a crash leaves the old or the new one)."""
    tmp = root.parent / f".{root.name}.stamp.tmp"
    tmp.write_text(json.dumps(stamp, indent=1) + "\n")
    os.replace(tmp, root / STAMP)


def read_stamp(root: Path) -> dict[str, Any] | None:
    """The tree's stamp, or None when there is none or it cannot be read."""
    try:
        doc = json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def reusable(root: Path, files: int, seed: int, fanout: int = FANOUT) -> bool:
    """True when `root` was built by this generator with these parameters and left clean."""
    stamp = read_stamp(root)
    return bool(
        stamp
        and stamp.get("generator") == GENERATOR
        and stamp.get("files") == files
        and stamp.get("seed") == seed
        and stamp.get("fanout") == fanout
        and stamp.get("clean") is True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fanout", type=int, default=FANOUT)
    args = parser.parse_args()
    stamp = build(args.dir, args.files, args.seed, args.fanout)
    stamp.pop("edit_candidates")
    json.dump(stamp, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
