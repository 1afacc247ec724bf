"""The command-line host's own public errors (declared in tillage.errors, so the generated
agent guide lists them)."""

from __future__ import annotations

from tillage.errors import CommandInterruptedError, UsageError

__all__ = ["CommandInterruptedError", "UsageError"]
