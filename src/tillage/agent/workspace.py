"""One attached folder, for a harness: the operations behind the tools, as Python calls.

Holding a Workspace is a claim that the folder was attached when it was opened; every method
still asks the store, so one forgotten since answers workspace.not_attached. Methods raise the
same public errors (`tillage.errors`) the command line answers, and keep the store open
between calls. The results are the verbs' own result values (the `--json` documents' fields).
"""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime
    from typing import Any

    from tillage.agent.sessions import Sessions
    from tillage.agent.sync_offer import SyncOffer
    from tillage.agent.tool import Tool
    from tillage.verbs.invoke import Settings


def settings_for(
    root: str | Path, home: str | Path | None = None, agent: str | None = None
) -> Settings:
    """The settings a library caller's call runs with: the store from `home` or, as the
    command line finds it, TILLAGE_HOME / XDG_DATA_HOME; output captured, never printed."""
    from tillage.platform.homes import store_home, user_home
    from tillage.verbs.invoke import Settings

    env = os.environ
    cwd = os.getcwd()
    folder = Path(os.path.abspath(os.path.expanduser(os.fspath(root))))
    store = Path(os.path.abspath(os.fspath(home))) if home is not None else None
    if store is None:
        store = Path(store_home(env, cwd))
    user = user_home(env)
    return Settings(
        home=store,
        folder=folder,
        agent=agent or env.get("TILLAGE_AGENT") or None,
        user_home=Path(user) if user is not None else None,
    )


class Workspace:
    """An attached folder and the store that keeps its timeline."""

    def __init__(
        self, root: str | Path, *, home: str | Path | None = None, agent: str | None = None
    ) -> None:
        from tillage.verbs.tools import Toolbelt

        self._settings = settings_for(root, home, agent)
        self._belt = Toolbelt(self._settings)

    @property
    def root(self) -> str:
        """The folder, absolute."""
        return str(self._settings.folder)

    def close(self) -> None:
        """Closes the store this object keeps open (it reopens on the next call)."""
        self._belt.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace({self.root!r})"

    # -- for a model ---------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """This workspace's tools, in the fixed order (see tillage.agent.tools)."""
        from tillage.agent.tool import Tool
        from tillage.verbs.tool_defs import tool_defs

        return [Tool(d, self._belt) for d in tool_defs()]

    # -- the timeline --------------------------------------------------------------------

    def snapshots(self, limit: int = 20) -> list[Any]:
        """The newest `limit` snapshots, newest first (SnapshotInfo values)."""
        return list(self._belt.run("timeline.list", limit=limit).snapshots)

    def point_near(self, when: datetime | float | str) -> Any | None:
        """The newest snapshot sealed at or before `when`, or None when the timeline starts
        later: there is no restore point from before tillage was watching, and the oldest one
        is not it. `when` is a datetime (a naive one is local time, as Python's own
        `datetime.timestamp()` reads it; an aware one as given), epoch seconds, or ISO 8601 /
        RFC 3339 text (naive text is local time too; `Z` or an offset as given).

        This is the join between a conversation's rewind and a workspace restore: the two
        share no vocabulary, only the clock."""
        found = self._belt.run("timeline.list", limit=1, before=_instant(when)).snapshots
        return found[0] if found else None

    def mark(self, agent: str, turn: str | int) -> str:
        """Seals a turn-end restore point attributed to `agent`'s `turn` (`till hook turn-end`,
        called directly), and returns its snapshot ID."""
        result = self._belt.run("agent.hook", event="turn-end", agent=agent, turn=str(turn))
        if result.snapshot is None:
            from tillage.errors import NotAttachedError

            raise NotAttachedError(result.note or f"{self.root} is not attached to tillage")
        return str(result.snapshot.id)

    def snap(self, label: str | None = None) -> Any:
        """Seals the folder now; returns the snapshot (SnapshotInfo)."""
        return self._belt.run("timeline.snap", label=label).snapshot

    # -- restores ------------------------------------------------------------------------

    def preview_restore(self, snapshot: str, paths: list[str] | None = None) -> Any:
        """What restoring `snapshot` (whole, or only `paths`) would change; touches nothing."""
        return self._belt.run("workspace.rewind", id=snapshot, paths=_paths(paths), dry_run=True)

    def apply_restore(self, snapshot: str, paths: list[str] | None = None) -> Any:
        """Restores `snapshot` (whole, or only `paths`), sealing the present first (`undo`).

        This passes the confirmation on: call it only with a person's yes (a model's
        tool previews unless it says `confirm: true`)."""
        return self._belt.run("workspace.rewind", id=snapshot, paths=_paths(paths), yes=True)

    # -- universes -----------------------------------------------------------------------

    def fork(self, name: str, destination: str | None = None) -> Any:
        """Makes a copy-on-write universe of the whole folder and hands it back (ForkInfo),
        running nothing in it: the ground a task is given."""
        return self._belt.run("fork.create", name=name, destination=destination).fork

    def run_in_fork(self, name: str, command: str) -> Any:
        """Runs `command` (through /bin/sh -c) in universe `name`, made first when missing;
        its exit code and captured output are in the returned ForkInfo. A non-zero exit is
        the command's answer, not an error."""
        return self._belt.run("fork.run", name=name, command=(command,)).fork

    def forks(self) -> list[Any]:
        """The live universes of this workspace."""
        return list(self._belt.run("fork.list").forks)

    def drop_fork(self, name: str, destination: str | None = None) -> Any:
        """Retires universe `name`: seals its last state, then deletes its folder. With
        `destination`, only if that is where the fork is (a stale name never deletes
        another fork's folder)."""
        return self._belt.run("fork.remove", name=name, destination=destination, yes=True)

    def merge_fork(self, fork: str, check: str | None = None, preview: bool = False) -> Any:
        """Lands universe `fork` three-way, only if `check` passes on the merged result in a
        scratch copy; `preview` plans and reports without writing anything (MergeResult)."""
        return self._belt.run("merge.apply", name=fork, check=check, dry_run=preview)

    # -- sync ----------------------------------------------------------------------------

    def offer_sync(self, remote: str, name: str | None = None) -> SyncOffer:
        """The commands a person runs on each machine to sync this folder through `remote`;
        runs nothing, and no recovery key is ever in it."""
        from tillage.agent.sync_offer import offer

        return offer(self.root, remote, name)

    # -- sessions ------------------------------------------------------------------------

    @property
    def sessions(self) -> Sessions:
        """This workspace's agent-session changelogs (create_session_snapshot, subscribe...)."""
        from tillage.agent.sessions import Sessions

        return Sessions(self._settings, self._belt)

    def create_session_snapshot(
        self, session_id: str, kind: str, description: str | None = None
    ) -> Any:
        """Records a commit in agent session `session_id`'s changelog: `start` begins the
        chain (a baseline), `end` closes it, anything else records the changes since the
        previous commit (returning that commit when nothing changed)."""
        return self.sessions.create_session_snapshot(session_id, kind, description)

    def subscribe(
        self, session: str | None = None, *, stop: Any = None, poll_seconds: float = 0.1
    ) -> Iterator[Any]:
        """Yields each new session commit as it is created (see Sessions.subscribe)."""
        return self.sessions.subscribe(session, stop=stop, poll_seconds=poll_seconds)


def _paths(paths: list[str] | tuple[str, ...] | str | None) -> tuple[str, ...] | None:
    if paths is None:
        return None
    if isinstance(paths, str):
        return (paths,)
    return tuple(paths) or None


def _instant(when: Any) -> str:
    """`when` as text the timeline's `before` reads: RFC 3339 UTC, or epoch seconds.

    A naive time is local time, as Python reads one everywhere else (`timestamp()`,
    `astimezone()`): a harness's `message.created_at` from `datetime.now()` names the moment it
    was taken, whatever zone the machine is in (the command line's `--before` reads naive text
    as UTC; this door speaks Python's convention, not the wire's)."""
    from datetime import datetime

    if isinstance(when, datetime):
        # astimezone() reads a naive datetime as local time (fold picks the hour a DST change
        # repeats), exactly as timestamp() does.
        return _utc(when).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return repr(float(when))
    if isinstance(when, str):
        return _text_instant(when)
    raise TypeError(f"point_near takes a datetime, epoch seconds or ISO 8601 text, not {when!r}")


def _text_instant(text: str) -> str:
    """ISO 8601 text as `before` reads it: naive text (no `Z`, no offset) is local time and is
    turned into UTC here, keeping every digit of its fraction (a time copied to the
    nanosecond still finds the snapshot sealed then); anything else goes on as given, and
    text that is no time is the verb's invalid_argument."""
    import re
    from datetime import datetime

    stripped = text.strip()
    try:
        float(stripped)
        return stripped  # epoch seconds
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(stripped)
    except ValueError:
        return text
    if parsed.tzinfo is not None:
        return stripped
    utc = _utc(parsed).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = re.search(r"\d[.,](\d+)", stripped)
    return f"{utc}.{fraction.group(1)[:9]}Z" if fraction else f"{utc}Z"


def _utc(when: datetime) -> datetime:
    """`when` in UTC (naive: local time); invalid_argument for one no clock can place (a year
    1 midnight east of Greenwich is before the first instant a datetime can hold)."""
    from datetime import UTC

    try:
        return when.astimezone(UTC)
    except (OverflowError, ValueError, OSError) as exc:
        from tillage.errors import InvalidArgumentError

        raise InvalidArgumentError(f"point_near: {when.isoformat()} is no time: {exc}") from exc
