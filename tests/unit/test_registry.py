"""The registry's own rules: every verb has an effect, every code sits in its module's range."""

from __future__ import annotations

import dataclasses

import pytest

from tillage.errors import (
    MODULE_RANGES,
    NotFoundError,
    TillageError,
    all_error_classes,
    catalogue_problems,
)
from tillage.verbs.contract import Effect, param, params_of
from tillage.verbs.registry import all_verbs


def test_every_verb_names_an_effect_and_an_audience() -> None:
    for verb in all_verbs():
        assert isinstance(verb.contract.effect, Effect), verb.contract.name


def test_verb_names_and_commands_are_unique() -> None:
    names = [v.contract.name for v in all_verbs()]
    commands = [v.contract.cli for v in all_verbs()]
    assert len(names) == len(set(names))
    assert len(commands) == len(set(commands))


def test_the_error_catalogue_has_no_duplicate_or_out_of_range_code() -> None:
    all_verbs()  # imports every verb module, and so every error class they answer
    assert catalogue_problems(list(all_error_classes())) == []


def test_a_code_outside_its_module_range_is_caught() -> None:
    class StrayError(TillageError):
        code = -31000
        name = "test.stray"
        module = "store"

    assert any("outside" in p for p in catalogue_problems([StrayError]))


def test_a_duplicate_code_is_caught() -> None:
    class OneError(TillageError):
        code = MODULE_RANGES["store"][1]
        name = "test.one"
        module = "store"

    class TwoError(TillageError):
        code = MODULE_RANGES["store"][1]
        name = "test.two"
        module = "store"

    assert any("already used" in p for p in catalogue_problems([OneError, TwoError]))


def test_a_shared_code_may_carry_a_module_name() -> None:
    class GoneError(NotFoundError):
        name = "test.gone"
        module = "store"

    assert catalogue_problems([GoneError]) == []


def test_every_destructive_verb_needs_confirmation() -> None:
    for verb in all_verbs():
        if verb.contract.effect is Effect.DESTRUCTIVE:
            assert verb.contract.needs_confirmation is not None, verb.contract.name


def test_a_request_field_without_param_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Bad:
        x: int = 0

    with pytest.raises(TypeError):
        params_of(Bad)


def test_params_are_derived_from_the_request() -> None:
    @dataclasses.dataclass(frozen=True)
    class Req:
        target: str = param("what", positional=True)
        limit: int = param("how many", default=5)

    params = params_of(Req)
    assert [(p.name, p.type, p.optional) for p in params] == [
        ("target", "string", False),
        ("limit", "int", True),
    ]


def test_the_command_table_names_every_verb_in_its_module() -> None:
    from tillage.verbs.registry import COMMANDS, verb_for_command

    assert set(COMMANDS) == {v.contract.cli for v in all_verbs()}
    for command in COMMANDS:
        verb = verb_for_command(command)
        assert verb is not None and verb.contract.cli == command
