"""The far side of an SSH remote: `till remote-serve --stdio PATH`, which the near side's
`ssh` starts (never a person); no store, no workspace."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class RemoteServeRequest:
    path: str = param(
        "the folder that holds the remote (created if missing); relative to the current "
        "folder (the login folder under ssh), `~` is the home folder",
        positional=True,
    )
    stdio: bool = param(
        "serve the remote protocol on stdin/stdout until stdin ends (how `ssh` runs it); "
        "without it, only say what would be served",
        default=False,
        flag="--stdio",
    )


@dataclass(frozen=True)
class RemoteServeResult:
    path: str  # the folder served, absolute
    protocol: int  # the remote protocol version this tillage speaks
    # True: this process goes on to serve frames on stdio (nothing else is printed).
    serving: bool


def remote_serve(ctx: Any, req: RemoteServeRequest) -> RemoteServeResult:
    import os

    from tillage.remote.wire import PROTOCOL_VERSION

    settings = ctx.settings
    path = req.path
    if path == "~" or path.startswith("~/"):
        home = settings.user_home
        path = os.path.join(str(home), path[2:]) if home is not None else os.path.expanduser(path)
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    path = os.path.normpath(os.path.join(str(settings.folder), path))
    return RemoteServeResult(path=path, protocol=PROTOCOL_VERSION, serving=req.stdio)


VERBS = (
    Verb(
        Contract(
            name="remote.serve",
            records_operation=False,  # a server for another machine: its calls are theirs
            since=1,
            scope=Scope.NONE,
            audience=Audience.INTERNAL,
            effect=Effect.WRITE,
            request=RemoteServeRequest,
            result=RemoteServeResult,
            cli="remote-serve",
            serves="remote",
            doc="The far side of an ssh:// remote: the near side's `ssh` runs `till "
            "remote-serve --stdio PATH` and speaks tillage's framed remote protocol with it on "
            "stdin/stdout (stdout carries only frames; diagnostics go to stderr).",
        ),
        remote_serve,
    ),
)
