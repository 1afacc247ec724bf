"""Resolving snapshot IDs: full, prefix, too short, ambiguous."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tillage.errors import AmbiguousError, InvalidArgumentError, NotFoundError
from tillage.workspace.attach import Workspace
from tillage.workspace.timeline import resolve

A = "abcdef" + "0" * 58
B = "abcdef" + "1" * 58


class FakeStore:
    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def snapshots_with_prefix(self, _ws: str, prefix: str) -> list[str]:
        return [i for i in self.ids if i.startswith(prefix)][:2]

    def snapshot(self, sid: str) -> Any:
        return sid if sid in self.ids else None

    def fork_of(self, _ws: str) -> None:
        return None  # a workspace with no forks and no parent: its timeline is all there is

    def forks_of(self, _ws: str, *, removed: bool = False) -> list[Any]:
        return []

    def fork_named(self, _ws: str, _name: str) -> None:
        return None  # no fork is called anything: every word is an ID or a name


def _ws(ids: list[str]) -> Workspace:
    return Workspace("w", Path("/nowhere"), FakeStore(ids))  # type: ignore[arg-type]


def test_a_unique_prefix_resolves() -> None:
    assert resolve(_ws([A, B]), "abcdef0") == A


def test_a_prefix_shared_by_two_snapshots_is_ambiguous() -> None:
    with pytest.raises(AmbiguousError) as err:
        resolve(_ws([A, B]), "abcdef")
    assert err.value.code == -32063


def test_a_prefix_shorter_than_six_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        resolve(_ws([A]), "abcde")


def test_an_unknown_id_is_not_found() -> None:
    with pytest.raises(NotFoundError):
        resolve(_ws([A]), "ffffff")


def test_upper_case_ids_are_accepted() -> None:
    assert resolve(_ws([A]), A.upper()) == A
