"""The library's public face: every exported name exists, is documented, and works."""

from __future__ import annotations

from pathlib import Path

import pytest

import tillage


def test_every_exported_name_is_importable_and_documented() -> None:
    for name in tillage.__all__:
        value = getattr(tillage, name)
        if name != "__version__":
            assert value.__doc__, f"tillage.{name} has no docstring"


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = tillage.no_such_thing  # type: ignore[attr-defined]


def test_the_library_answers_the_same_public_errors_as_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(tillage.NotAttachedError) as err:
        tillage.call("workspace.status", home=tmp_path / "store", folder=tmp_path)
    assert err.value.code == -32060


def test_the_library_refuses_the_home_directory_when_told_where_it_is(tmp_path: Path) -> None:
    with pytest.raises(tillage.InvalidArgumentError):
        tillage.call(
            "workspace.watch",
            home=tmp_path / "store",
            folder=tmp_path,
            user_home=tmp_path,
            no_daemon=True,
        )


def test_contracts_are_listed_without_a_store() -> None:
    names = {c["verb"] for c in tillage.contracts()}
    assert {"workspace.rewind", "timeline.snap", "system.contracts"} <= names
