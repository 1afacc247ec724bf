"""`till ui`: Mission Control, a page on 127.0.0.1 where a person sees every universe of a
workspace's family and rewinds or merges with a click (hosts/web serves it).

The verb checks what it can before a port is bound (the folder is attached, the port is one);
the command line then hands its process to the web door, as `till mcp` hands it to MCP. The
errors below are the web door's own answers, declared here so the catalogue (and
docs/agents.md) lists them with every other public error.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import InvalidArgumentError, TillageError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PORT = 65535


class StalePreviewError(TillageError):
    """What the page showed is no longer what the action would do: the folder, the fork or the
    snapshot moved since the preview. Nothing was changed; `details.preview` is the fresh one."""

    code = -32330
    name = "ui.stale_preview"
    module = "ui"
    next_step = "look at the fresh preview (details.preview) and confirm it again"


class HostRefusedError(TillageError):
    """A request named a host other than the one the page is served on (DNS rebinding: a page
    of another site reaching 127.0.0.1 under its own name)."""

    code = -32331
    name = "ui.host_refused"
    module = "ui"
    next_step = "open the URL `till ui` printed (http://127.0.0.1:PORT/...)"


class OriginRefusedError(TillageError):
    """A call that changes something came from another origin, or said none: only the page
    itself may drive it."""

    code = -32332
    name = "ui.origin_refused"
    module = "ui"
    next_step = "use the page `till ui` printed; a script must send Origin: http://127.0.0.1:PORT"


class TokenRefusedError(TillageError):
    """A call to the page's API without this run's token in the X-Tillage-Token header (a
    cookie is never taken: another site's page could make the browser send one)."""

    code = -32333
    name = "ui.token_refused"
    module = "ui"
    next_step = "open the URL `till ui` printed: it carries this run's token"


class NotOfferedError(TillageError):
    """The page's door offers no such call (`details.offered` lists those it offers)."""

    code = -32334
    name = "ui.not_offered"
    module = "ui"
    next_step = "call one of the verbs details.offered lists"


class UnknownUniverseError(TillageError):
    """The universe named is not of this page's family (or no longer is: a fork removed)."""

    code = -32335
    name = "ui.unknown_universe"
    module = "ui"
    next_step = "reload the page: its list of universes is out of date"


class PortInUseError(TillageError):
    """`till ui --port N`: another program (or another `till ui`) listens on that port."""

    code = -32336
    name = "ui.port_in_use"
    module = "ui"
    next_step = "give another --port, or leave it out for a free one"


class ConfirmMismatchError(TillageError):
    """An apply confirmed another snapshot than the preview it names: nothing was changed."""

    code = -32337
    name = "ui.confirm_mismatch"
    module = "ui"
    next_step = "preview again and confirm the snapshot the preview shows"


@dataclass(frozen=True)
class UiRequest:
    port: int = param("the port on 127.0.0.1 to serve on (default: a free one)", default=0)
    open: bool = param("also open the page in this machine's browser", default=False)


@dataclass(frozen=True)
class UiResult:
    workspace: str
    port: int
    open: bool
    # True: this process goes on to serve the page (it prints its URL once listening).
    serving: bool


def ui(ctx: Any, req: UiRequest) -> UiResult:
    if not 0 <= req.port <= MAX_PORT:
        raise InvalidArgumentError(f"--port must be 0..{MAX_PORT} (0: a free one), not {req.port}")
    return UiResult(workspace=str(ctx.workspace.root), port=req.port, open=req.open, serving=True)


VERBS = (
    Verb(
        Contract(
            name="system.ui",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.READ,
            request=UiRequest,
            result=UiResult,
            cli="ui",
            serves="web",
            errors=(
                InvalidArgumentError,
                PortInUseError,
                StalePreviewError,
                HostRefusedError,
                OriginRefusedError,
                TokenRefusedError,
                NotOfferedError,
                UnknownUniverseError,
                ConfirmMismatchError,
            ),
            doc="Serve Mission Control for this workspace's family on 127.0.0.1: a page with "
            "every universe (the workspace and its forks: disk cost, head, last seal, "
            "collisions), each one's timeline and what each snapshot changed, and the actions "
            "that matter (rewind and fork removal previewed before they apply, merge with its "
            "check, pin, claims), each a call of the same verbs. It prints the page's URL, "
            "which carries this run's token (`--json`: one line with `url`, `port`, `token`); "
            "Ctrl-C or SIGTERM stops it.",
        ),
        ui,
    ),
)
