"""One tool for a model, bound to the toolbelt that calls it (seam.tools and
Workspace.tools hand them out)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from tillage.verbs.tool_defs import ToolDef
    from tillage.verbs.tools import Toolbelt, ToolResult


class Tool:
    """One tool for a model: name, description, JSON schema, and `call(args) -> ToolResult`
    (`text` for the model, capped; `is_error`; `document`, the machine answer, whole;
    `structured`, that answer as a model reads it, capped like the text)."""

    def __init__(self, definition: ToolDef, belt: Toolbelt) -> None:
        self._definition = definition
        self._belt = belt
        self.name = definition.name
        self.description = definition.description
        self.input_schema: dict[str, Any] = definition.input_schema()
        self.annotations = definition.annotations()

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (the same as `input_schema`)."""
        return self.input_schema

    def call(self, args: Mapping[str, Any] | None = None) -> ToolResult:
        """Runs the tool; a failure is a result with `is_error`, never an exception."""
        return self._belt.call(self.name, args or {})

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"
