"""The one registry: every verb a user or agent can ask for, collected from the verb modules.

Importing a verb module declares contracts and cheap dataclasses only; handlers import their
feature code when they run, so listing every contract stays fast and does no I/O.
"""

from __future__ import annotations

import importlib
from functools import cache

from tillage.verbs.contract import Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# Each module exposes VERBS: tuple[Verb, ...]. Order here is the order docs list them in.
VERB_MODULES = (
    "tillage.verbs.system",
    "tillage.verbs.workspace",
    "tillage.verbs.timeline",
    "tillage.verbs.listing",
    "tillage.verbs.rewind",
    "tillage.verbs.store",
    "tillage.verbs.events",
    "tillage.verbs.hooks",
    "tillage.verbs.forks",
    "tillage.verbs.watch_fork",
    "tillage.verbs.merge",
    "tillage.verbs.radar",
    "tillage.verbs.coord",
    "tillage.verbs.bisect",
    "tillage.verbs.sessions",
    "tillage.verbs.project",
    "tillage.verbs.lifecycle",
    "tillage.verbs.sync",
    "tillage.verbs.remote_refs",
    "tillage.verbs.remote",
    "tillage.verbs.estimate",
    "tillage.verbs.remote_serve",
    "tillage.verbs.oplog",
    "tillage.verbs.completion",
    "tillage.verbs.ui",
)


# Which module declares each command, so a host can load one verb without the rest (start-up
# matters: agents call `till` hundreds of times). A test keeps this table equal to the registry.
COMMANDS = {
    "contracts": "tillage.verbs.system",
    "version": "tillage.verbs.system",
    "agents-md": "tillage.verbs.system",
    "watch": "tillage.verbs.workspace",
    "status": "tillage.verbs.workspace",
    "forget": "tillage.verbs.workspace",
    "snap": "tillage.verbs.timeline",
    "timeline": "tillage.verbs.timeline",
    "show": "tillage.verbs.timeline",
    "diff": "tillage.verbs.timeline",
    "cat": "tillage.verbs.timeline",
    "ls": "tillage.verbs.listing",
    "pin": "tillage.verbs.timeline",
    "unpin": "tillage.verbs.timeline",
    "rewind": "tillage.verbs.rewind",
    "verify": "tillage.verbs.store",
    "events": "tillage.verbs.events",
    "hook": "tillage.verbs.hooks",
    "fork": "tillage.verbs.forks",
    "forks": "tillage.verbs.forks",
    "fork-rm": "tillage.verbs.forks",
    "run": "tillage.verbs.forks",
    "exec": "tillage.verbs.forks",
    "watch-fork": "tillage.verbs.watch_fork",
    "radar": "tillage.verbs.radar",
    "claim": "tillage.verbs.radar",
    "claims": "tillage.verbs.radar",
    "release": "tillage.verbs.radar",
    "try": "tillage.verbs.radar",
    "coord write": "tillage.verbs.coord",
    "coord read": "tillage.verbs.coord",
    "coord list": "tillage.verbs.coord",
    "merge": "tillage.verbs.merge",
    "bisect": "tillage.verbs.bisect",
    "mcp": "tillage.verbs.system",
    "sessions": "tillage.verbs.sessions",
    "session start": "tillage.verbs.sessions",
    "session record": "tillage.verbs.sessions",
    "session end": "tillage.verbs.sessions",
    "session log": "tillage.verbs.sessions",
    "session diff": "tillage.verbs.sessions",
    "session revert": "tillage.verbs.sessions",
    "session cleanup": "tillage.verbs.sessions",
    "session changelog": "tillage.verbs.sessions",
    "project hydrate": "tillage.verbs.project",
    "project flush": "tillage.verbs.project",
    "gc": "tillage.verbs.lifecycle",
    "retention": "tillage.verbs.lifecycle",
    "budget": "tillage.verbs.lifecycle",
    "remote add": "tillage.verbs.sync",
    "remote list": "tillage.verbs.sync",
    "remote refs": "tillage.verbs.remote_refs",
    "remote repair-ref": "tillage.verbs.remote_refs",
    "remote check": "tillage.verbs.remote",
    "remote repair": "tillage.verbs.remote",
    "remote rekey": "tillage.verbs.remote",
    "sync": "tillage.verbs.sync",
    "clone": "tillage.verbs.sync",
    "work": "tillage.verbs.sync",
    "estimate": "tillage.verbs.estimate",
    "remote-serve": "tillage.verbs.remote_serve",
    "op log": "tillage.verbs.oplog",
    "undo": "tillage.verbs.oplog",
    "completion": "tillage.verbs.completion",
    "ui": "tillage.verbs.ui",
}


def verb_for_command(command: str) -> Verb[Any, Any] | None:
    """Returns the verb spelled `command` on the command line, importing only its module."""
    module_name = COMMANDS.get(command)
    if module_name is None:
        return None
    module = importlib.import_module(module_name)
    for verb in module.VERBS:
        if verb.contract.cli == command:
            return verb  # type: ignore[no-any-return]
    return None


@cache
def all_verbs() -> tuple[Verb[Any, Any], ...]:
    """Returns every registered verb, in documentation order."""
    verbs: list[Verb[Any, Any]] = []
    for module_name in VERB_MODULES:
        module = importlib.import_module(module_name)
        verbs.extend(module.VERBS)
    return tuple(verbs)


def by_name(name: str) -> Verb[Any, Any]:
    """Returns the verb called `name` ("timeline.list"); KeyError when there is none."""
    for verb in all_verbs():
        if verb.contract.name == name:
            return verb
    raise KeyError(name)
