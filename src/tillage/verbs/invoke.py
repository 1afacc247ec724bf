"""Runs a verb the same way for every door: resolve its scope, enforce confirmation, call it.

Safety rules live here, in one place, derived from contract metadata: a host supplies only how to
ask a person (or nothing, in machine mode), never whether to ask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tillage.errors import ConfirmationRequiredError
from tillage.verbs.contract import Scope, Verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.core.progress import ProgressFn


def _no_progress(_progress: Any) -> None:
    return None


@dataclass(frozen=True)
class Settings:
    """Everything a host read from the environment, argv and config, handed down frozen."""

    home: Path
    folder: Path
    agent: str | None = None
    debug: bool = False
    user_home: Path | None = None


@dataclass
class Context:
    """What a handler receives besides its request."""

    settings: Settings
    workspace: Any = None  # tillage.workspace.attach.Workspace once resolved
    on_progress: ProgressFn = field(default=_no_progress)


def resolve_context(verb: Verb[Any, Any], settings: Settings) -> Context:
    """Resolves the verb's scope: an attached workspace, a folder, or nothing."""
    ctx = Context(settings=settings)
    if verb.contract.scope is Scope.WORKSPACE:
        from tillage.workspace.attach import require_workspace

        ctx.workspace = require_workspace(settings.home, settings.folder)
    return ctx


def invoke(
    verb: Verb[Any, Any],
    settings: Settings,
    request: Any,
    *,
    confirm: Callable[[Any], bool] | None = None,
    on_progress: ProgressFn | None = None,
) -> Any:
    """Runs `verb` on `request`.

    A request the contract says needs confirmation is previewed and shown to `confirm`; with no
    `confirm` (machine mode) it changes nothing and raises confirmation_required.
    """
    contract = verb.contract
    ctx = resolve_context(verb, settings)
    if on_progress is not None:
        ctx.on_progress = on_progress
    if contract.validate is not None:
        contract.validate(ctx, request)
    if contract.needs_confirmation is not None and contract.needs_confirmation(request):
        if confirm is None:
            raise ConfirmationRequiredError(
                f"{contract.cli} changes files and needs --yes; nothing was changed",
            )
        preview = contract.preview(request) if contract.preview else None
        shown = verb.handler(ctx, preview) if preview is not None else None
        if not confirm(shown):
            raise ConfirmationRequiredError(f"{contract.cli} was not confirmed; nothing changed")
        request = contract.confirmed(request) if contract.confirmed else request
    return verb.handler(ctx, request)
