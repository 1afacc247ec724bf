"""Agent-session changelogs for a harness: the seed's session adapter, on tillage's store.

A harness calls `create_session_snapshot(session_id, kind, description)` at its own session
boundaries (`start` begins a chain with a baseline; `end` closes it; anything else records the
changes since the previous commit, or returns that commit when nothing changed), and may
`subscribe` to see each commit as it is made, whoever made it (a hook at turn end, another
process). Everything else is the `till session ...` verbs, as calls.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from tillage.verbs.invoke import Settings
    from tillage.verbs.tools import Toolbelt

# What a harness's snapshot kind means; any other kind records.
KIND_VERBS = {"start": "session.start", "end": "session.end"}


class Sessions:
    """The session changelogs of one workspace."""

    def __init__(self, settings: Settings, belt: Toolbelt) -> None:
        self._settings = settings
        self._belt = belt

    def create_session_snapshot(
        self, session_id: str, kind: str, description: str | None = None
    ) -> Any:
        """Records a commit in session `session_id` (see the module doc); returns it."""
        verb = KIND_VERBS.get(kind, "session.record")
        return self._belt.run(verb, session=session_id, description=description).commit

    def log(self, session_id: str) -> list[Any]:
        """A session's commits, oldest first (empty for an unknown session)."""
        return list(self._belt.run("session.log", session=session_id).commits)

    def sessions(self) -> list[Any]:
        """Every session of this workspace, most recently updated first."""
        return list(self._belt.run("session.list").sessions)

    def diff(self, commit: str, to: str | None = None) -> list[Any]:
        """What changed in `commit` (from its parent), or from `commit` to `to`."""
        return list(self._belt.run("session.diff", commit=commit, to=to).changes)

    def changelog(self, session_id: str) -> Any:
        """The session's commits, each with the files it changed."""
        return self._belt.run("session.changelog", session=session_id)

    def revert(self, commit: str) -> Any:
        """Puts the folder back to `commit`, after recording a backup commit of the present.
        This passes the confirmation on: call it only with a person's yes."""
        return self._belt.run("session.revert", commit=commit, yes=True)

    def subscribe(
        self, session: str | None = None, *, stop: Any = None, poll_seconds: float = 0.1
    ) -> Iterator[Any]:
        """Yields each new commit (of `session`, or of any session) as it is created, as the
        same commit value `create_session_snapshot` returns; from the moment of this call
        (a commit made before the first `next` is not missed), until `stop` (a
        threading.Event) is set. Blocks between commits."""
        from tillage.features.sessions.sessions import follow_commits
        from tillage.verbs.sessions import commit_info
        from tillage.workspace.attach import require_workspace

        s = self._settings
        ws = require_workspace(s.home, s.folder, s.user_home)
        rows = follow_commits(ws, session=session, poll_seconds=poll_seconds, stop=stop)
        return _closing((commit_info(row) for row in rows), ws.store)


def _closing(items: Iterator[Any], store: Any) -> Iterator[Any]:
    """`items`, closing `store` when they end or the caller stops reading."""
    try:
        yield from items
    finally:
        store.close()
