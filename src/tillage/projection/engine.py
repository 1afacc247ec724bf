"""A projection: hydrate collections into a place, flush the place back, and say what was
decided about every path.

The baseline (`base`) is what this projection last committed at each path, not what it
hydrated: a file the run creates and flushes belongs to it from then on, which is what lets a
later deletion of that file propagate. A projection with no baseline at a path owns nothing
there: it writes only where the collection is untouched, and deletes nothing.

Each durable entry a flush or a put commits is claimed (collection ID + key) before the
collection is read, and released when that operation ends: the read-compare-write is one
step no other run can split, and two runs never both write one entry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tillage.core.paths import CONTROL_DIR
from tillage.core.projection import (
    claim_key,
    decide,
    hash_content,
    is_metadata,
    join,
    normalize,
    normalize_prefix,
    route,
    shows_as_itself,
)
from tillage.projection.claims import ClaimRegistry, shared_claims
from tillage.projection.collections import Collection
from tillage.projection.places import Place, PlaceUnreadableError, UnsafePathError


@dataclass(frozen=True)
class Mount:
    """One collection at one prefix of the place. `collection_id` is what the collection IS,
    durably (the same string for two runs addressing the same rows): claims are keyed on it.
    `entry_state(key)` adds to the state of every entry a flush commits, applied last."""

    prefix: str
    collection: Collection
    collection_id: str
    writable: bool
    entry_state: Callable[[str], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Outcome:
    """What a flush or put decided about one path; the hashes are hex SHA-256 (None: absent).

    `base` is what this projection last committed there, `theirs` what the collection held,
    `ours` what the place held; `prefix` names the read-only mount of a `readonly` put."""

    kind: str
    path: str
    base: str | None = None
    theirs: str | None = None
    ours: str | None = None
    prefix: str | None = None


@dataclass(frozen=True)
class FlushReport:
    """Every path a flush reached, and the two kinds a caller must look at."""

    outcomes: list[Outcome]
    conflicts: list[Outcome] = field(default_factory=list)
    contested: list[Outcome] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many paths had each outcome."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.kind] = out.get(o.kind, 0) + 1
        return out


class UnflushedEditsError(Exception):
    """A hydrate would overwrite files of writable mounts that hold content this projection
    never committed (edits not flushed yet): nothing was written. `paths` names them."""

    def __init__(self, paths: Sequence[str]) -> None:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(f"hydrating would overwrite edits not flushed yet: {shown}")
        self.paths = list(paths)


class DuplicateMountError(ValueError):
    """One collection (by `collection_id`) or one prefix mounted twice."""


class _Operation:
    """One flush or put: the holder of the claims it takes, released when it ends."""

    def __init__(self, registry: ClaimRegistry) -> None:
        self.registry = registry
        self.keys: list[str] = []

    def claim(self, key: str) -> bool:
        if self.registry.try_claim(key, self):
            self.keys.append(key)
            return True
        return False

    def release(self) -> None:
        for key in self.keys:
            self.registry.release(key, self)
        self.keys.clear()


class Projection:
    """Mounts over a place: `await hydrate()`, `await flush()`, `await put(path, content)`,
    `owned_paths()`; `hydrate_sync`, `flush_sync` and `put_sync` for callers without a loop.

    `baseline` (path → hash) resumes a projection another process made (the command line
    keeps it between `till project hydrate` and `flush`); `committed()` returns it."""

    def __init__(
        self,
        mounts: Sequence[Mount],
        place: Place,
        claims: ClaimRegistry | None = None,
        *,
        baseline: Mapping[str, str] | None = None,
    ) -> None:
        seen_ids: set[str] = set()
        seen_prefixes: set[str] = set()
        normalized = []
        for m in mounts:
            if m.collection_id in seen_ids:
                raise DuplicateMountError(f"collection {m.collection_id!r} is mounted twice")
            prefix = normalize_prefix(m.prefix)
            if prefix in seen_prefixes:
                raise DuplicateMountError(f"two collections are mounted at {prefix!r}")
            seen_ids.add(m.collection_id)
            seen_prefixes.add(prefix)
            normalized.append(
                Mount(prefix, m.collection, m.collection_id, m.writable, m.entry_state)
            )
        self.mounts: tuple[Mount, ...] = tuple(normalized)
        self.place = place
        self.claims = claims if claims is not None else shared_claims
        self._prefixes = [m.prefix for m in self.mounts]
        self._base: dict[str, str] = dict(baseline or {})

    # -- what it owns ----------------------------------------------------------------------

    def owned_paths(self) -> list[str]:
        """The paths this projection holds a baseline for: what it would write to, and what
        it would delete."""
        return sorted(self._base)

    def committed(self) -> dict[str, str]:
        """The baseline: each owned path and the hash last committed there."""
        return dict(self._base)

    # -- hydrate ---------------------------------------------------------------------------

    async def hydrate(self, *, keep_edits: bool = False) -> None:
        """Lays every entry of every mount down under its prefix (left out: metadata keys,
        keys a place cannot spell as they are, tillage's own folder, entries a longer
        prefix's mount owns), and records a baseline for writable mounts.

        `keep_edits`: first check that no file of a writable mount it would overwrite holds
        content this projection never committed (an edit not flushed yet); if one does,
        raise UnflushedEditsError and write nothing. The command line hydrates this way."""
        planned: list[tuple[str, str, bool]] = []
        for index, mount in enumerate(self.mounts):
            for key in await mount.collection.list():
                if is_metadata(key) or not shows_as_itself(key):
                    continue
                path = join(mount.prefix, key)
                if path.partition("/")[0] == CONTROL_DIR:
                    continue  # tillage's own folder in the place is never written
                if route(path, self._prefixes) != (index, key):
                    continue  # a nested mount (or none) owns that path
                content = await mount.collection.read(key)
                if content is None:
                    continue  # removed since it was listed
                planned.append((path, content, mount.writable))
        if keep_edits:
            await self._refuse_overwriting_edits(planned)
        for path, content, writable in planned:
            await self.place.write(path, content)
            if writable:
                self._base[path] = hash_content(content)

    async def _refuse_overwriting_edits(self, planned: Sequence[tuple[str, str, bool]]) -> None:
        edited = []
        for path, content, writable in planned:
            if not writable:
                continue  # a read-only mount's files were never going anywhere
            now = await self.place.read(path)
            if now is None or now == content:
                continue
            if hash_content(now) != self._base.get(path):
                edited.append(path)
        if edited:
            raise UnflushedEditsError(edited)

    # -- flush -----------------------------------------------------------------------------

    async def flush(self) -> FlushReport:
        """Decides every path against the baseline, the collection now and the place now, and
        commits what it may; a report, not an exception, on disagreement.

        Lists only the writable mounts' prefixes: a file outside them is never read and
        never reported. Only a path absent from that listing was deleted by the run; one
        listed and then gone when read is left alone (no outcome) and stays owned.

        Raises PlaceUnreadableError (and changes nothing) when the place cannot be listed;
        a collection's failure propagates as it is: that work did not reach the store."""
        prefixes = self._listed_prefixes()
        try:
            found = await self.place.list(prefixes) if prefixes else []
        except Exception as exc:
            raise PlaceUnreadableError(f"the place could not be listed: {exc}") from exc
        # Only what the writable mounts own is decided (a place that lists more than it was
        # asked for does not make the rest of it orphans).
        listed = {p for p in found if _under_any(p, prefixes)}
        listed.update([p for p in prefixes if p and await self._is_file(p)])
        operation = _Operation(self.claims)
        outcomes: list[Outcome] = []
        try:
            for path in sorted(listed | set(self._base)):
                outcome = await self._decide(path, path in listed, operation)
                if outcome is not None:
                    outcomes.append(outcome)
        finally:
            operation.release()
        return FlushReport(
            outcomes=outcomes,
            conflicts=[o for o in outcomes if o.kind == "conflict"],
            contested=[o for o in outcomes if o.kind == "contested"],
        )

    def _listed_prefixes(self) -> list[str]:
        """The writable mounts' prefixes, none inside another (a nested one is listed with the
        one holding it): all a flush lists. A file elsewhere is nothing a flush could write or
        delete, so it is never read, and never an orphan."""
        writable = {m.prefix for m in self.mounts if m.writable}
        return sorted(
            p for p in writable if not any(q != p and _under_any(p, [q]) for q in writable)
        )

    async def _is_file(self, prefix: str) -> bool:
        """Whether a file stands where a writable mount's folder belongs (an orphan: no mount
        takes it, and a listing under the prefix cannot show it)."""
        try:
            return await self.place.read(prefix) is not None
        except (UnsafePathError, FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return False

    async def _decide(self, path: str, present: bool, op: _Operation) -> Outcome | None:
        routed = route(path, self._prefixes)
        if routed is None:
            # Listed, so at or under a writable mount's prefix, yet no mount takes it: a file
            # where a mount's folder belongs.
            return Outcome("orphan", path) if present else None
        mount, key = self.mounts[routed[0]], routed[1]
        if not mount.writable:
            return None  # hydrated and left alone: not ours, not an orphan
        if is_metadata(key):
            # A collection's own metadata is never flushed: a file the run wrote under that
            # name is reported, never guessed into the collection.
            return Outcome("orphan", path) if present else None
        # The base before the place, and the place now rather than as listed: a put of this
        # projection may have written the path since the listing, and a deletion decided from
        # the listing with that put's fresh base would remove what it just committed. (A stale
        # base only turns a write into a conflict; a stale `ours` with a fresh base deletes.)
        base = self._base.get(path)
        try:
            content = await self.place.read(path)
        except FileNotFoundError:
            content = None  # a place that says "no file" by raising
        except UnsafePathError:
            if present:
                raise
            content = None  # a link where the file was: no file, as the listing said
        if content is None and present:
            # Listed, then gone before it was read: an editor replacing the file, a moment
            # nobody can describe. Only a path absent from the listing was deleted by the run,
            # so this one is left alone and stays owned; the next flush decides it.
            return None
        ours = None if content is None else hash_content(content)
        if ours is None and base is None:
            return None  # not listed, no file, nothing owned: nothing to decide
        if ours == base:
            return Outcome("unchanged", path, base=base, ours=ours)
        return await self._commit(mount, key, path, base, content, ours, op)

    async def _commit(
        self,
        mount: Mount,
        key: str,
        path: str,
        base: str | None,
        content: str | None,
        ours: str | None,
        op: _Operation,
    ) -> Outcome:
        """The read-compare-write of one entry, under its claim (taken before the read)."""
        if not op.claim(claim_key(mount.collection_id, key)):
            return Outcome("contested", path, base=base, ours=ours)
        current = await mount.collection.read(key)
        theirs = None if current is None else hash_content(current)
        verdict = decide(base, theirs, ours)
        if verdict.write:
            assert content is not None and ours is not None
            await mount.collection.write(key, content, self._state(mount, key, path, ours))
        elif verdict.delete:
            await mount.collection.delete(key)
        if verdict.kind != "conflict":  # a conflict keeps the base: the next flush asks again
            if verdict.base_after is None:
                self._base.pop(path, None)
            else:
                self._base[path] = verdict.base_after
        return Outcome(verdict.kind, path, base=base, theirs=theirs, ours=ours)

    @staticmethod
    def _state(mount: Mount, key: str, path: str, digest: str) -> dict[str, Any]:
        from tillage.platform.clock import rfc3339

        now = rfc3339(time.time_ns())
        state: dict[str, Any] = {"path": path, "hash": digest, "updated_at": now}
        if mount.entry_state is not None:
            state.update(mount.entry_state(key))
        return state

    # -- put -------------------------------------------------------------------------------

    async def put(self, path: str, content: str) -> Outcome | None:
        """Applies a flush's decision to one path a caller wrote through its own channel (a
        tool that writes one named file): the place gets the content, and the collection
        gets it where that is safe. The projection owns the path from then on.

        None only for a collection's metadata key; `readonly` (with the mount's prefix) under
        a read-only mount, where nothing is written and a retry will not change that."""
        try:
            path = normalize(path)
        except ValueError as exc:
            raise UnsafePathError(str(exc)) from exc
        routed = route(path, self._prefixes)
        if routed is not None:
            mount, key = self.mounts[routed[0]], routed[1]
            if is_metadata(key):
                return None
            if not mount.writable:
                return Outcome("readonly", path, prefix=mount.prefix)
        await self.place.write(path, content)
        if routed is None:
            return Outcome("orphan", path)
        ours = hash_content(content)
        base = self._base.get(path)
        operation = _Operation(self.claims)
        try:
            return await self._commit(mount, key, path, base, content, ours, operation)
        finally:
            operation.release()

    # -- without an event loop --------------------------------------------------------------

    def hydrate_sync(self) -> None:
        """hydrate() for a caller with no event loop running."""
        asyncio.run(self.hydrate())

    def flush_sync(self) -> FlushReport:
        """flush() for a caller with no event loop running."""
        return asyncio.run(self.flush())

    def put_sync(self, path: str, content: str) -> Outcome | None:
        """put() for a caller with no event loop running."""
        return asyncio.run(self.put(path, content))


def _under_any(path: str, prefixes: Iterable[str]) -> bool:
    """Whether `path` is at or below one of `prefixes` ("" holds everything)."""
    return any(p in ("", path) or path.startswith(p + "/") for p in prefixes)


def outcome_kinds(outcomes: Iterable[Outcome]) -> dict[str, str]:
    """Path → kind, for reading a report at a glance."""
    return {o.path: o.kind for o in outcomes}
