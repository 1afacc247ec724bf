"""Human pages of the radar, claim and try verbs (loaded by verb prefix from human.py)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli.human import Page

RENDERERS: dict[str, Callable[[Page], None]] = {}
