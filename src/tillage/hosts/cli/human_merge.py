"""Human pages of the merge verbs (hosts/cli/human.py loads this module by verb prefix)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli.human import Page

RENDERERS: dict[str, Callable[[Page], None]] = {}
