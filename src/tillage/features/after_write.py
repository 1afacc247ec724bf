"""What follows a write, once: the event it is, a radar look, and the space budget.

The verb layer's invocation calls it after a verb that changed something; the watcher's seal
loop after a seal that added a snapshot; `sync --follow` after each cycle (the verb hands the
step to the follower). The budget is checked once per write, never once per seal inside one: a
merge's two seals, or a push's, cost one check, and no seal runs a gc in the middle of a verb.
It composes features (radar, lifecycle), so it lives at the top of `features`, where no single
feature has to import another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from tillage.errors import TillageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.store.store import Store


def after_write(
    store: Store,
    workspace_id: str | None,
    *,
    event: tuple[str, Mapping[str, Any]] | None = None,
) -> None:
    """Announces `event` (an appended event's kind and detail), looks for collisions with the
    workspace's family, and enforces the store's budget. The write stands whatever happens in
    the budget step (another process's gc, a full disk): `till status` tells a store that
    stays over."""
    if workspace_id is not None and event is not None:
        from tillage.store.events import announce

        announce(store, workspace_id, event[0], dict(event[1]))
    if workspace_id is not None:
        from tillage.features.radar.radar import look_for_collisions

        look_for_collisions(store, workspace_id)
    keep_budget(store)


def keep_budget(store: Store) -> None:
    """The budget check after a write (an index query and a statvfs; a gc only when over)."""
    from tillage.features.lifecycle.budget import check_after_write

    with contextlib.suppress(TillageError, OSError):
        check_after_write(store)
