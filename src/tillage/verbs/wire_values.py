"""Checks wire values (JSON from a door that is not the command line) against a verb's params
before its request is built: a wrong type is invalid_argument naming the param, never a
handler's crash on a string where it counted on an integer."""

from __future__ import annotations

from collections.abc import Mapping

from tillage.errors import InvalidArgumentError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.verbs.contract import Contract


def checked_values(contract: Contract[Any, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Returns `values` with each known param checked against its declared type (null where
    the param may be null; JSON lists of strings where it takes a list). Unknown names are
    left for decode_request to refuse by name."""
    params = {p.name: p for p in contract.params()}
    checked: dict[str, Any] = {}
    for name, value in values.items():
        param = params.get(name)
        checked[name] = value if param is None else _check(contract.name, name, param.type, value)
    return checked


KNOWN = ("null", "bool", "int", "float", "string", "map", "any")


def _is(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "map":
        return isinstance(value, dict)
    if kind.startswith("list["):
        inner = kind[len("list[") : -1]
        return isinstance(value, list) and all(_is(inner, item) for item in value)
    return kind == "any"


def _check(verb: str, name: str, declared: str, value: Any) -> Any:
    kinds = [k.strip() for k in declared.split("|")]
    if value is None:
        if "null" in kinds:
            return None
        raise InvalidArgumentError(f"{verb}: {name} may not be null")
    for kind in kinds:
        if kind not in KNOWN and not kind.startswith("list["):
            return value  # a type of its own: its handler checks it
        if _is(kind, value):
            return value
    wanted = " or ".join(k for k in kinds if k != "null")
    raise InvalidArgumentError(f"{verb}: {name} must be {wanted}")
