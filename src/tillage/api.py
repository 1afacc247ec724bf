"""The library door onto the verb registry: the same verbs, contracts and errors as `till`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tillage.verbs.contract import decode_request
from tillage.verbs.invoke import Settings, invoke
from tillage.verbs.registry import all_verbs, by_name


def call(
    verb: str,
    *,
    home: Path,
    folder: Path,
    agent: str | None = None,
    user_home: Path | None = None,
    **params: Any,
) -> Any:
    """Runs the verb called `verb` ("workspace.rewind") and returns its result dataclass.

    Destructive verbs are never confirmed on the caller's behalf: pass `yes=True` (or
    `dry_run=True` to preview); otherwise they raise ConfirmationRequiredError. Pass
    `user_home` to have attaching refuse the user's home directory and its ancestors, as the
    command line does (the library reads no environment to find it).
    Raises the same public errors the command line answers.
    """
    v = by_name(verb)
    settings = Settings(
        home=Path(home), folder=Path(folder).absolute(), agent=agent, user_home=user_home
    )
    return invoke(v, settings, decode_request(v.contract, params))


def contracts() -> list[dict[str, Any]]:
    """Returns every verb's contract, as `till contracts` prints them."""
    return [v.contract.describe() for v in all_verbs()]
