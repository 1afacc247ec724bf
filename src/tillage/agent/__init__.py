"""tillage for harness authors: a model's tools when they can work, and the operations behind
them as Python calls.

    import tillage.agent
    belt = [*my_tools, *tillage.agent.tools(workspace_root)]   # [] when not attached

See `presence`, `open_workspace`, `attach` and `Workspace` (point_near, mark, offer_sync,
sessions). Outputs meant for a model are capped at about 4,000 bytes and say what they left
out; no recovery key ever appears in one.
"""

from tillage.agent.seam import (
    PRESENCE_TTL,
    Presence,
    attach,
    forget,
    open_workspace,
    presence,
    tools,
)
from tillage.agent.sessions import Sessions
from tillage.agent.sync_offer import SyncOffer
from tillage.agent.tool import Tool
from tillage.agent.workspace import Workspace
from tillage.verbs.tools import ToolResult

__all__ = [
    "PRESENCE_TTL",
    "Presence",
    "Sessions",
    "SyncOffer",
    "Tool",
    "ToolResult",
    "Workspace",
    "attach",
    "forget",
    "open_workspace",
    "presence",
    "tools",
]
