"""Human-readable rendering of result documents, for people at a terminal (stdout)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _snapshot_line(snap: dict[str, Any]) -> str:
    label = f"  {snap['label']}" if snap.get("label") else ""
    pin = " pinned" if snap.get("pinned") else ""
    return (
        f"{snap['short']}  {snap['sealed_at']}  {snap['trigger']:<10} "
        f"{snap['files']:>6} files {snap['bytes']:>12} B  {snap['grade']}{pin}{label}"
    )


def _is_snapshot(value: Any) -> bool:
    return isinstance(value, dict) and "short" in value and "sealed_at" in value


def _lines(value: Any, indent: str) -> list[str]:
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if _is_snapshot(item):
                out.append(f"{indent}{key}: {_snapshot_line(item)}")
            elif isinstance(item, (dict, list)) and item:
                out.append(f"{indent}{key}:")
                out.extend(_lines(item, indent + "  "))
            else:
                out.append(f"{indent}{key}: {_scalar(item) if item != [] else '(none)'}")
    elif isinstance(value, list):
        for item in value:
            if _is_snapshot(item):
                out.append(f"{indent}{_snapshot_line(item)}")
            elif isinstance(item, dict) and "path" in item and "kind" in item:
                out.append(f"{indent}{item['kind']:<12} {item['path']}")
            elif isinstance(item, dict):
                first, *rest = _lines(item, indent + "  ") or [""]
                out.append(indent + "- " + first.strip())
                out.extend(rest)
            else:
                out.append(f"{indent}- {_scalar(item)}")
    else:
        out.append(indent + _scalar(value))
    return out


def render(verb: str, document: Any) -> str:
    """Returns a result document as indented text; snapshots and changes get one line each."""
    del verb  # one shape for all verbs today; the parameter lets a verb get its own later
    return "\n".join(_lines(document, "")) + "\n"
