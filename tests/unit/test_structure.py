"""The folder tree is the architecture: no import circle anywhere (imports inside functions
included), no module over 800 lines, and everything outside the engine reaches it through its
interface (`tillage.workspace.__all__`) and public names only."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import grimp

import tillage

SRC = Path(tillage.__file__).parent
MAX_LINES = 800
ENGINE = "tillage.workspace"


def import_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("tillage")  # counts imports inside functions too
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_the_cycle_finder_finds_a_circle_and_only_circles() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": []}
    assert import_cycles(edges) == [["a", "b", "c"]]
    assert import_cycles({"a": ["b"], "b": [], "c": ["a", "b"]}) == []


def test_no_import_circle_anywhere_in_the_package() -> None:
    assert import_cycles(_graph()) == []


def test_no_module_is_over_800_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _engine_imports_from_outside() -> Iterable[tuple[str, str, str]]:
    """(importing file, engine module, imported name) for every import into the engine from a
    module outside it; the name is "" for `import tillage.workspace.x`."""
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "workspace"):
            continue
        where = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ENGINE):
                for alias in node.names:
                    yield where, str(node.module), alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(ENGINE + "."):
                        yield where, alias.name, ""


def _interface_problem(module: str, name: str) -> str | None:
    """Why importing `name` from the engine's `module` goes round its interface, or None."""
    if module == ENGINE:  # `from tillage.workspace import seal`
        module, name = f"{ENGINE}.{name}", ""
    parts = module[len(ENGINE) + 1 :].split(".")
    package = ENGINE
    for part in parts:
        listed = getattr(importlib.import_module(package), "__all__", None)
        if listed is None or part not in listed:
            return f"{package}.{part} is not in {package}.__all__"
        package = f"{package}.{part}"
    if name.startswith("_"):
        return f"{name} is private to {module}"
    return None


def test_everything_outside_the_engine_goes_through_its_interface() -> None:
    problems = sorted(
        f"{where}: {problem}"
        for where, module, name in _engine_imports_from_outside()
        if (problem := _interface_problem(module, name)) is not None
    )
    assert problems == []


def test_the_interface_check_refuses_an_internal_module_and_a_private_name() -> None:
    assert _interface_problem(f"{ENGINE}.seal", "seal") is None
    assert _interface_problem(ENGINE, "seal") is None
    assert _interface_problem(f"{ENGINE}.journal.landing", "land") is None
    assert _interface_problem(f"{ENGINE}.journal.applier", "Applier") is not None
    assert _interface_problem(f"{ENGINE}.sqlite_image", "SIDECAR_SUFFIXES") is not None
    assert _interface_problem(f"{ENGINE}.seal", "_policy") is not None


def test_the_interface_names_modules_that_exist() -> None:
    for package in (ENGINE, f"{ENGINE}.journal"):
        for name in importlib.import_module(package).__all__:
            importlib.import_module(f"{package}.{name}")
