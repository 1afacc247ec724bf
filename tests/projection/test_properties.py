"""Properties of a projection that a table of examples cannot pin down.

- Hydrate then flush, with no edits in between, decides `unchanged` for every owned path and
  leaves every collection byte for byte as it was: over random collections (nested folders,
  metadata keys, unicode, empty content, bytes that are not UTF-8), random nested prefixes,
  writable and read-only mounts, in memory and in a real folder.
- Two projections sharing one collection, running edits, deletions, puts and flushes
  interleaved on one event loop, never lose a committed write: every write or deletion a
  projection reports was made against exactly the content its `theirs` hash names (it was not
  decided from a stale read). With claims switched off the same check fails, so it can fail.
- The pure parts against models: routing against a brute-force longest prefix, `claim_key`
  against its own decoder, and `normalize` never handing back a path that could leave.
"""

from __future__ import annotations

import asyncio
import posixpath
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.projection import BadPathError, claim_key, hash_content, normalize, route
from tillage.projection import (
    ClaimRegistry,
    HostPlace,
    MemoryCollection,
    MemoryPlace,
    Mount,
    Outcome,
    Place,
    Projection,
    shared_claims,
)

# -- a brute-force model of routing ----------------------------------------------------------


def model_route(path: str, prefixes: Sequence[str]) -> tuple[int, str] | None:
    """Routing by cutting the path at each `/`, longest head first: the first head that is a
    mount's prefix owns the rest; a path that is itself a prefix belongs to nobody."""
    if path in prefixes:
        return None
    segments = path.split("/")
    for cut in range(len(segments) - 1, -1, -1):
        head = "/".join(segments[:cut])
        if head in prefixes:
            return prefixes.index(head), "/".join(segments[cut:])
    return None


def place_path(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


# -- hydrate, then flush with no edits ---------------------------------------------------------

# Folder names never hold a ".", file names always end in ".md": no file can sit where another
# entry's folder (or a mount's root) must be, which a real folder could not hold.
FOLDER = st.one_of(
    st.sampled_from(["a", "b", "ü"]),
    st.text(alphabet="az09-_é日本🙂 ", min_size=1, max_size=6),
)
FILE = st.text(alphabet="az09-_é日本🙂 ", min_size=1, max_size=6).map(lambda s: s + ".md")
KEY = st.tuples(st.lists(FOLDER, max_size=3), FILE).map(lambda t: "/".join([*t[0], t[1]]))
METADATA_KEY = KEY.map(lambda k: "_" + k)
CONTENT = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape")),
)
COLLECTION = st.dictionaries(st.one_of(KEY, KEY, METADATA_KEY), CONTENT, max_size=6)
PREFIX = st.lists(st.sampled_from(["a", "b", "ü", "a-b"]), max_size=3).map("/".join)
MOUNTS = st.lists(
    st.tuples(PREFIX, COLLECTION, st.booleans()),
    min_size=1,
    max_size=4,
    unique_by=lambda m: m[0],
)


def expected_place(mounts: Sequence[tuple[str, Mapping[str, str], bool]]) -> dict[str, str]:
    """What hydrate should lay down: each non-metadata entry at its path, when its own mount
    (not a longer one) owns that path."""
    prefixes = [m[0] for m in mounts]
    out: dict[str, str] = {}
    for index, (prefix, entries, _) in enumerate(mounts):
        for key, content in entries.items():
            path = place_path(prefix, key)
            if not key.startswith("_") and model_route(path, prefixes) == (index, key):
                out[path] = content
    return out


async def place_files(place: Place) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in await place.list([""]):
        content = await place.read(path)
        assert content is not None, path
        out[path] = content
    return out


def check_round_trip(
    mounts: Sequence[tuple[str, Mapping[str, str], bool]], make_place: Callable[[], Place]
) -> None:
    collections = [MemoryCollection(entries) for _, entries, _ in mounts]
    place = make_place()
    projection = Projection(
        [
            Mount(prefix, collection, f"col{i}", writable)
            for i, ((prefix, _, writable), collection) in enumerate(
                zip(mounts, collections, strict=True)
            )
        ],
        place,
        ClaimRegistry(),
    )
    laid = expected_place(mounts)
    owned = set()
    for path in laid:
        routed = model_route(path, [m[0] for m in mounts])
        assert routed is not None
        if mounts[routed[0]][2]:
            owned.add(path)

    asyncio.run(projection.hydrate())
    assert asyncio.run(place_files(place)) == laid
    assert set(projection.owned_paths()) == owned, "a baseline only for writable mounts"

    report = asyncio.run(projection.flush())
    assert {o.path: o.kind for o in report.outcomes} == dict.fromkeys(owned, "unchanged")
    assert report.conflicts == [] and report.contested == []
    for (_, entries, _), collection in zip(mounts, collections, strict=True):
        assert collection.as_dict() == entries
        assert all(collection.state(key) is None for key in entries), "nothing was written"
    assert asyncio.run(place_files(place)) == laid


@examples(300)
@given(mounts=MOUNTS)
def test_hydrate_then_flush_with_no_edits_is_all_unchanged_in_memory(
    mounts: list[tuple[str, dict[str, str], bool]],
) -> None:
    check_round_trip(mounts, MemoryPlace)


@examples(100)
@given(mounts=MOUNTS)
def test_hydrate_then_flush_with_no_edits_is_all_unchanged_in_a_real_folder(
    mounts: list[tuple[str, dict[str, str], bool]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_round_trip(mounts, lambda: HostPlace(Path(tmp) / "place"))


@pytest.mark.parametrize(
    ("place_kind", "prefix", "key"),
    [
        ("memory", "art", "a//b.md"),
        ("memory", "art", "/lead.md"),
        ("memory", "art", "trail/"),
        ("memory", "art", "./dot.md"),
        ("memory", "art", "a/./b.md"),
        ("memory", "art", ""),
        ("host", "", ".tillage/x.md"),
        ("host", "art", "x.tillage-tmp-1.md"),
    ],
)
def test_an_entry_the_place_cannot_show_as_spelled_survives_a_flush_with_no_edits(
    tmp_path: Path, place_kind: str, prefix: str, key: str
) -> None:
    """A collection's keys are whatever its writers stored (an SQLite table's are any text).
    One the place would spell differently (`a//b.md` lands at `a/b.md`) or would not list
    (`.tillage/…`, temporary names) must not be renamed or deleted by a round trip with no
    edits: hydrate may refuse it, or lay it down and leave it alone, but nothing changes."""
    entries = {key: "v", "ok.md": "o"}
    collection = MemoryCollection(entries)
    place: Place = MemoryPlace() if place_kind == "memory" else HostPlace(tmp_path / "place")
    projection = Projection([Mount(prefix, collection, "c", True)], place, ClaimRegistry())
    try:
        asyncio.run(projection.hydrate())
    except ValueError:  # UnsafePathError: refused, which is honest
        assert collection.as_dict() == entries
        return
    report = asyncio.run(projection.flush())
    changed = {o.path: o.kind for o in report.outcomes if o.kind != "unchanged"}
    assert changed == {}, f"a flush with no edits changed the collection: {changed}"
    assert collection.as_dict() == entries


# -- two projections, one collection, any interleaving ---------------------------------------

KEYS = ("k0.md", "k1.md", "d/k2.md")
VALUES = ("A", "B", "")


@dataclass(frozen=True)
class Event:
    """One change to the shared collection: who made it (task, operation number), and the
    content just before and just after (None: absent)."""

    writer: str
    op: int
    key: str
    before: str | None
    after: str | None


# Which task, and which of its operations, is running: task-local (each asyncio task runs in
# its own copy of the context), so two tasks sharing one projection are told apart.
CURRENT: ContextVar[tuple[str, int]] = ContextVar("CURRENT", default=("hydrate", 0))


@dataclass
class Traced:
    """A view of a shared collection: every call yields to the event loop (`yields()` times,
    before and after), so awaits of two operations interleave, and every write or deletion
    records, atomically with it, what it replaced and which operation made it."""

    shared: MemoryCollection
    log: list[Event]
    yields: Callable[[], int]

    async def _pause(self) -> None:
        for _ in range(self.yields()):
            await asyncio.sleep(0)

    async def list(self) -> list[str]:
        await self._pause()
        return await self.shared.list()

    async def read(self, key: str) -> str | None:
        await self._pause()
        value = self.shared.get(key)
        await self._pause()
        return value

    async def write(self, key: str, content: str, state: Mapping[str, Any]) -> None:
        await self._pause()
        self.log.append(Event(*CURRENT.get(), key, self.shared.get(key), content))
        await self.shared.write(key, content, state)
        await self._pause()

    async def delete(self, key: str) -> None:
        await self._pause()
        self.log.append(Event(*CURRENT.get(), key, self.shared.get(key), None))
        await self.shared.delete(key)
        await self._pause()


class NoClaims(ClaimRegistry):
    """Claims switched off: every claim is granted, held or not."""

    def try_claim(self, key: str, holder: object) -> bool:
        return True


Op = tuple[Any, ...]  # ("edit", key, value) | ("remove", key) | ("put", key, value) | ("flush",)


@dataclass
class Run:
    """One task of an interleaving: its projection, and its outcomes per operation number."""

    name: str
    prefix: str
    projection: Projection
    place: MemoryPlace
    outcomes: dict[int, list[Outcome]] = field(default_factory=dict)

    def key_of(self, path: str) -> str:
        return path[len(self.prefix) + 1 :] if self.prefix else path


def opt_hash(content: str | None) -> str | None:
    return None if content is None else hash_content(content)


async def play(run: Run, ops: Sequence[Op], pause: Callable[[], int]) -> None:
    for number, op in enumerate(ops, start=1):
        for _ in range(pause()):
            await asyncio.sleep(0)
        CURRENT.set((run.name, number))
        path = place_path(run.prefix, op[1]) if len(op) > 1 else ""
        if op[0] == "edit":
            await run.place.write(path, op[2])
        elif op[0] == "remove":
            run.place.remove(path)
        elif op[0] == "put":
            outcome = await run.projection.put(path, op[2])
            run.outcomes[number] = [] if outcome is None else [outcome]
        else:
            run.outcomes[number] = list((await run.projection.flush()).outcomes)


def lost_writes(
    runs: Sequence[Run], log: Sequence[Event], initial: Mapping[str, str], final: Mapping[str, str]
) -> list[str]:
    """Every way the log contradicts the reports: a reported write or deletion with no change
    behind it or made over other content than its `theirs`, a change nobody reported, and a
    collection that does not end as the log says."""
    problems: list[str] = []
    for run in runs:
        for number, outcomes in run.outcomes.items():
            events = {e.key: e for e in log if e.writer == run.name and e.op == number}
            effects = {
                run.key_of(o.path): o
                for o in outcomes
                if o.kind in ("written", "created", "deleted")
            }
            for key in sorted(events.keys() - effects.keys()):
                problems.append(f"{run.name} op {number} changed {key} and did not say so")
            for key, o in sorted(effects.items()):
                e = events.get(key)
                if e is None:
                    problems.append(f"{run.name} op {number} said {o.kind} {key}; no change")
                    continue
                if opt_hash(e.before) != o.theirs:
                    problems.append(
                        f"{run.name} op {number} {o.kind} {key} over {e.before!r}, "
                        f"having read {o.theirs}: a committed write lost"
                    )
                if opt_hash(e.after) != (None if o.kind == "deleted" else o.ours):
                    problems.append(f"{run.name} op {number} {o.kind} {key}: not ours")
    replay = dict(initial)
    for e in log:
        if replay.get(e.key) != e.before:
            problems.append(f"{e.writer} op {e.op} changed {e.key} behind the log's back")
        if e.after is None:
            replay.pop(e.key, None)
        else:
            replay[e.key] = e.after
    if replay != final:
        problems.append(f"the collection ends as {final}, the last committed values are {replay}")
    return problems


def interleave(
    initial: Mapping[str, str],
    sides: Sequence[tuple[str, bool, Sequence[Op]]],
    registry: ClaimRegistry | None,
    yields: Callable[[], int],
    *,
    one_projection: bool = False,
) -> tuple[list[Run], list[Event], MemoryCollection]:
    """Runs one task per side (prefix, hydrated first?, operations) over one collection: each
    with its own projection and place, or (`one_projection`) all sharing the first side's, as
    overlapping requests share a session's workspace."""
    shared = MemoryCollection(initial)
    log: list[Event] = []
    runs: list[Run] = []
    for i, (prefix, _, _) in enumerate(sides):
        if one_projection and runs:
            runs.append(Run(f"t{i}", runs[0].prefix, runs[0].projection, runs[0].place))
            continue
        place = MemoryPlace()
        view = Traced(shared, log, yields)
        projection = Projection([Mount(prefix, view, "shared", True)], place, registry)
        runs.append(Run(f"t{i}", prefix, projection, place))

    async def main() -> None:
        hydrated = {id(run.projection) for run, side in zip(runs, sides, strict=True) if side[1]}
        for run in runs:
            if id(run.projection) in hydrated:
                hydrated.discard(id(run.projection))
                await run.projection.hydrate()
        await asyncio.gather(
            *(play(run, ops, yields) for run, (_, _, ops) in zip(runs, sides, strict=True))
        )

    asyncio.run(main())
    return runs, log, shared


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("edit"), st.sampled_from(KEYS), st.sampled_from(VALUES)),
        st.tuples(st.just("remove"), st.sampled_from(KEYS)),
        st.tuples(st.just("put"), st.sampled_from(KEYS), st.sampled_from(VALUES)),
        st.tuples(st.just("flush")),
        st.tuples(st.just("flush")),
    ),
    max_size=10,
)
SIDE = st.tuples(st.sampled_from(["w", "x/y", ""]), st.booleans(), OPS)


@pytest.mark.parametrize(
    "registry", ["shared default", "one registry for both", "one projection, two tasks"]
)
@examples(300)
@given(
    initial=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES)),
    sides=st.tuples(SIDE, SIDE),
    rnd=st.randoms(use_true_random=False),
)
def test_any_interleaving_of_two_projections_never_loses_a_committed_write(
    registry: str,
    initial: dict[str, str],
    sides: tuple[tuple[str, bool, list[Op]], tuple[str, bool, list[Op]]],
    rnd: random.Random,
) -> None:
    """Two projections over one collection (sharing the process-wide registry, or one
    given to both), or one projection two overlapping requests use: claims belong to an
    operation, so two tasks of one projection arbitrate as two projections do."""
    claims = None if registry == "shared default" else ClaimRegistry()
    assert shared_claims.held() == []
    runs, log, shared = interleave(
        initial,
        sides,
        claims,
        lambda: rnd.randint(0, 2),
        one_projection=registry == "one projection, two tasks",
    )

    assert lost_writes(runs, log, initial, shared.as_dict()) == []
    assert (claims or shared_claims).held() == [], "every claim ended with its operation"


class ClaimsPerProjection(ClaimRegistry):
    """Claims held by the projection rather than the operation: every operation of one
    projection is granted a key another of its operations holds."""

    def try_claim(self, key: str, holder: object) -> bool:
        return super().try_claim(key, "the projection")

    def release(self, key: str, holder: object) -> None:
        super().release(key, "the projection")


def test_with_claims_switched_off_two_flushes_lose_a_write() -> None:
    """The property above can fail: both projections read "0", both decide `written`, and the
    second write lands over the first without either being told."""
    initial = {"k.md": "0"}
    sides = [
        ("w", True, [("edit", "k.md", "one"), ("flush",)]),
        ("v", True, [("edit", "k.md", "two"), ("flush",)]),
    ]
    runs, log, shared = interleave(initial, sides, NoClaims(), lambda: 1)
    assert [o.kind for r in runs for o in r.outcomes[2]] == ["written", "written"]
    problems = lost_writes(runs, log, initial, shared.as_dict())
    assert len(problems) == 1 and "a committed write lost" in problems[0], problems
    assert shared.as_dict() == {"k.md": "two"}, "the first write is gone, nobody told"

    runs, log, shared = interleave(initial, sides, ClaimRegistry(), lambda: 1)
    assert sorted(o.kind for r in runs for o in r.outcomes[2]) == ["contested", "written"]
    assert lost_writes(runs, log, initial, shared.as_dict()) == []


def test_with_claims_held_by_the_projection_two_requests_lose_a_write() -> None:
    """The same for one projection two overlapping requests share: claims that belong to the
    projection grant both puts the entry, and the later one writes over the earlier."""
    initial = {"k.md": "0"}
    sides = [("w", True, [("put", "k.md", "one")]), ("w", True, [("put", "k.md", "two")])]
    runs, log, shared = interleave(
        initial, sides, ClaimsPerProjection(), lambda: 1, one_projection=True
    )
    assert [o.kind for r in runs for o in r.outcomes[1]] == ["written", "written"]
    problems = lost_writes(runs, log, initial, shared.as_dict())
    assert len(problems) == 1 and "a committed write lost" in problems[0], problems

    runs, log, shared = interleave(initial, sides, ClaimRegistry(), lambda: 1, one_projection=True)
    assert sorted(o.kind for r in runs for o in r.outcomes[1]) == ["contested", "written"]
    assert lost_writes(runs, log, initial, shared.as_dict()) == []


# -- one projection, a put landing while its flush is under way --------------------------------


class Gated(MemoryCollection):
    """A collection whose read of one key, once armed, waits for a gate (so a test can hold a
    flush in the middle), saying when it got there."""

    def __init__(self, initial: Mapping[str, str], key: str) -> None:
        super().__init__(initial)
        self.key = key
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.armed = False

    async def read(self, key: str) -> str | None:
        if self.armed and key == self.key and not self.gate.is_set():
            self.reached.set()
            await self.gate.wait()
        return await super().read(key)


def test_a_put_landing_while_a_flush_is_under_way_is_not_deleted_by_its_stale_listing() -> None:
    """One projection shared by overlapping requests (a session's workspace): the run deleted
    x.md, a flush lists the place and stops at a.md; meanwhile a put writes x.md and is told
    `written`. The flush's listing predates the put, so it must not take x.md for deleted:
    the put's committed write stays in the collection."""

    async def main() -> tuple[Outcome | None, dict[str, str], list[Outcome], dict[str, str]]:
        collection = Gated({"a.md": "1", "x.md": "1"}, "a.md")
        place = MemoryPlace()
        projection = Projection([Mount("p", collection, "col", True)], place, ClaimRegistry())
        await projection.hydrate()
        await place.write("p/a.md", "2")
        place.remove("p/x.md")
        collection.armed = True
        flush = asyncio.create_task(projection.flush())
        await collection.reached.wait()
        put = await projection.put("p/x.md", "new")
        collection.gate.set()
        report = await flush
        return put, collection.as_dict(), list(report.outcomes), place.snapshot()

    put, entries, outcomes, files = asyncio.run(main())
    assert put is not None and put.kind == "written"
    assert files["p/x.md"] == "new"
    assert entries.get("x.md") == "new", (
        f"the put's committed write was lost to a flush that never saw it: {outcomes}"
    )


# -- the pure parts ----------------------------------------------------------------------------

SEGMENT = st.sampled_from(["a", "b", "a-old", "ab", "日"])
PATH = st.lists(SEGMENT, min_size=1, max_size=4).map("/".join)


@examples(300)
@given(
    path=PATH,
    prefixes=st.lists(st.lists(SEGMENT, max_size=3).map("/".join), max_size=5, unique=True),
)
def test_route_is_the_longest_prefix_on_a_folder_boundary(path: str, prefixes: list[str]) -> None:
    routed = route(path, prefixes)
    assert routed == model_route(path, prefixes)
    if routed is not None:
        assert place_path(prefixes[routed[0]], routed[1]) == path
        assert routed[1] and not routed[1].startswith("/")


def test_route_examples_the_model_agrees_with() -> None:
    assert route("artifacts-old/x", ["artifacts"]) is None
    assert route("artifacts", ["artifacts"]) is None
    assert route("a/b", ["", "a/b"]) is None
    assert route("a/b/c", ["a", "a/b"]) == (1, "c")
    assert route("x", [""]) == (0, "x")


def decode_claim_key(text: str) -> tuple[str, str]:
    """The inverse of claim_key: proof that two different pairs never share a key."""
    out: list[str] = []
    rest = text
    for _ in range(2):
        length, _, rest = rest.partition(":")
        n = int(length)
        out.append(rest[:n])
        rest = rest[n:]
    assert rest == ""
    return out[0], out[1]


CONFUSABLE = st.text(alphabet="0123456789:ab/", max_size=8)


@examples(300)
@given(
    a=st.tuples(st.one_of(st.text(), CONFUSABLE), st.one_of(st.text(), CONFUSABLE)),
    b=st.tuples(st.one_of(st.text(), CONFUSABLE), st.one_of(st.text(), CONFUSABLE)),
)
def test_claim_key_never_names_two_different_entries_alike(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    assert decode_claim_key(claim_key(*a)) == a
    assert (claim_key(*a) == claim_key(*b)) == (a == b)


@examples(200)
@given(collection=CONFUSABLE, key=CONFUSABLE, cut=st.integers(min_value=0, max_value=8))
def test_claim_key_keeps_apart_pairs_that_concatenate_alike(
    collection: str, key: str, cut: int
) -> None:
    joined = collection + key
    other = (joined[:cut], joined[cut:])
    assume(other != (collection, key))
    assert claim_key(collection, key) != claim_key(*other)


@examples(400)
@given(path=st.one_of(st.text(alphabet="ab./\0 ", max_size=14), st.text(max_size=14)))
def test_normalize_never_returns_a_path_that_could_leave(path: str) -> None:
    segments = path.split("/")
    try:
        out = normalize(path)
    except BadPathError:
        names = [s for s in segments if s not in ("", ".")]
        assert path.startswith("/") or "\0" in path or ".." in segments or not names
        return
    assert not path.startswith("/") and ".." not in segments and "\0" not in path
    parts = out.split("/")
    assert all(p not in ("", ".", "..") for p in parts)
    assert not out.startswith("/") and "\0" not in out
    assert parts == [s for s in segments if s not in ("", ".")], "no name invented or dropped"
    assert normalize(out) == out
    assert posixpath.normpath(posixpath.join("/root", out)).startswith("/root/")


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "..", "../x", "a/../../x", "a/..", "./..", "", ".", "./", "a\0b"]
)
def test_normalize_refuses_what_could_escape(path: str) -> None:
    with pytest.raises(BadPathError):
        normalize(path)
