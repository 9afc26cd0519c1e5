"""The package's import graph: no circle, and dependencies point one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in (ROOT / "azync_flow").rglob("*.py")
}


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package modules an import statement of ``module`` loads by name."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    # ``from pkg import submodule`` needs the submodule, not pkg's other names
    return subs if len(subs) == len(node.names) else [base, *subs]


def _imports(
    body: list[ast.stmt], *, top: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it runs at import time (not in a
    function, not under ``if TYPE_CHECKING``)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, top
        else:
            typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            nested = (
                top
                and not typing_only
                and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            )
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(node, field, None)
                if isinstance(sub, list):
                    yield from _imports(sub, top=nested)


def _with_packages(target: str) -> list[str]:
    """``target`` and the packages Python imports first to load it (each
    package's ``__init__`` runs, with every import it makes). A package that
    encloses the importing module is already loading and is left out."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]


def _graph(*, lazy_too: bool) -> dict[str, set[str]]:
    """Module -> the package modules it imports: at import time only, or (with
    ``lazy_too``) also in functions and under ``if TYPE_CHECKING``."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node, top in _imports(ast.parse(path.read_text()).body, top=True):
            if top or lazy_too:
                loaded = {
                    p
                    for t in _targets(module, node)
                    for p in _with_packages(t)
                    if p == t or not (module == p or module.startswith(f"{p}."))
                }
                graph[module] |= {t for t in loaded if t in MODULES} - {module}
    return graph


def _wrong(graph: dict[str, set[str]], package: str, forbidden: tuple[str, ...]) -> list[str]:
    """``module -> target`` for each import of ``package`` into ``forbidden``."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module == package or module.startswith(f"{package}.")
        for target in targets
        if any(target == f or target.startswith(f"{f}.") for f in forbidden)
    )


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_a_circle() -> None:
    assert _circles(_graph(lazy_too=False)) == []


def test_the_circle_finder_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("azync_flow.replay", ("azync_flow.store.postgres", "azync_flow.runtime")),
        ("azync_flow.dag", ("azync_flow.store.postgres",)),
        ("azync_flow.runtime", ("azync_flow.store.postgres",)),
        ("azync_flow.client", ("azync_flow.store.postgres",)),
    ],
)
def test_dependencies_point_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    assert _wrong(_graph(lazy_too=False), package, forbidden) == []


#: What the generic worker must never import, not even in a function or for types.
WORKER_FORBIDDEN = (
    "azync_flow.runtime",
    "azync_flow.workflow",
    "azync_flow.dag",
    "azync_flow.client",
)


def test_the_worker_imports_nothing_of_workflows_dags_or_the_client() -> None:
    assert _wrong(_graph(lazy_too=True), "azync_flow.worker", WORKER_FORBIDDEN) == []


def test_the_worker_check_sees_a_function_level_import() -> None:
    source = "def f():\n    from ..runtime.worker_runtime import attach_workflows\n"
    ((node, top),) = _imports(ast.parse(source).body, top=True)
    assert not top
    graph = {"azync_flow.worker._worker": set(_targets("azync_flow.worker._worker", node))}
    assert _wrong(graph, "azync_flow.worker", WORKER_FORBIDDEN) == [
        "azync_flow.worker._worker -> azync_flow.runtime.worker_runtime"
    ]


@pytest.mark.parametrize(
    "package",
    sorted(m for m, path in MODULES.items() if path.name == "__init__.py"),
)
def test_each_package_imports_first_in_a_fresh_interpreter(package: str) -> None:
    # A circle through a package's __init__ breaks only when that package is the
    # first one imported (as a subscriber app that starts with azync_flow.events).
    done = subprocess.run(
        [sys.executable, "-c", f"import {package}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
