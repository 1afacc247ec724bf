"""What changed since a seal's view: the watcher's answer to "what must the next seal look at".

A seal records the token of the view it captured; the watcher answers `since(token)` with the
folders whose listing or entries changed after that view, or with `dirs=None` when it cannot
vouch for the interval (another watcher's token, a restart, an overflowed event queue): the
caller then walks the whole folder. Correctness never depends on the watcher; speed does. This
is Git's fsmonitor and watchman's "since" query, with folders as the unit of change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object


@dataclass(frozen=True)
class Changes:
    """The answer to since(token): a fresh token for the view as of now, and the folders
    (workspace-relative, "" for the root) changed after the asked token, or None: unknown.

    `names` says, for the changed folders where the watcher knows it, which names in them
    changed (created, deleted, renamed, written, or their attributes); a changed folder
    missing from `names` changed in ways not told by name, and is listed whole."""

    token: str
    dirs: frozenset[str] | None
    names: Mapping[str, frozenset[str]] = field(default_factory=dict)


class ChangeSource(Protocol):
    """Anything that can say what changed since a token: the watcher in-process, or a client
    that asks the watcher over its socket."""

    def since(self, token: str | None) -> Changes: ...


def parse_token(token: str | None) -> tuple[str, int] | None:
    """Splits "EPOCH:GENERATION"; None for anything else."""
    if not token or token.count(":") != 1:
        return None
    epoch, _, gen = token.partition(":")
    if not epoch or not gen.isdigit():
        return None
    return epoch, int(gen)


class ChangeLog:
    """The watcher's record of changed folders, by generation (pure; the caller locks).

    `epoch` is unique to one watcher run, so a token from an earlier run is never trusted.
    Every noted change advances the generation; `lose()` marks a moment the watcher may have
    missed something (queue overflow, a watch that failed), and no token from before it is
    answered with a list.
    """

    def __init__(self, epoch: str) -> None:
        if ":" in epoch or not epoch:
            raise ValueError("an epoch is a non-empty string without ':'")
        self.epoch = epoch
        self.generation = 0
        self.lost_at = 0
        self._changed: dict[str, int] = {}
        self._whole: dict[str, int] = {}  # folder -> last generation it changed without a name
        self._names: dict[str, dict[str, int]] = {}  # folder -> name -> generation

    def note(self, rel_dir: str, name: str | None = None) -> None:
        """Records that the entry `name` of folder `rel_dir` changed, or with no name, that
        the folder changed in ways not told by name (it is listed whole)."""
        self.generation += 1
        self._changed[rel_dir] = self.generation
        if name is None:
            self._whole[rel_dir] = self.generation
        else:
            self._names.setdefault(rel_dir, {})[name] = self.generation

    def lose(self) -> None:
        """Records that changes may have been missed: earlier tokens fall back to a full walk."""
        self.generation += 1
        self.lost_at = self.generation
        self._changed.clear()
        self._whole.clear()
        self._names.clear()

    def token(self) -> str:
        return f"{self.epoch}:{self.generation}"

    def since(self, token: str | None) -> Changes:
        now = self.token()
        parsed = parse_token(token)
        if parsed is None or parsed[0] != self.epoch:
            return Changes(now, None)
        generation = parsed[1]
        if generation > self.generation or generation < self.lost_at:
            return Changes(now, None)
        dirs = frozenset(d for d, g in self._changed.items() if g > generation)
        names = {
            d: frozenset(n for n, g in self._names.get(d, {}).items() if g > generation)
            for d in dirs
            if self._whole.get(d, 0) <= generation
        }
        return Changes(now, dirs, names)


def folders_to_visit(changed: frozenset[str]) -> frozenset[str]:
    """The changed folders and every folder above them: a seal re-lists these and re-uses the
    stored tree of every other folder (a change below a folder changes that folder's tree)."""
    visit = {""}
    for folder in changed:
        rel = folder
        while rel and rel not in visit:
            visit.add(rel)
            rel = rel.rpartition("/")[0]
    return frozenset(visit)
