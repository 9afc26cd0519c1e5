"""The package's import graph: no circle (counting imports in functions and
under ``if TYPE_CHECKING``), dependencies point one way, and no module reaches
into another package's private module."""

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


def _sources() -> dict[str, str]:
    return {module: path.read_text() for module, path in MODULES.items()}


def _graph(*, lazy_too: bool, sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the package modules it imports: at import time only, or (with
    ``lazy_too``) also in functions and under ``if TYPE_CHECKING``. ``sources``
    (module -> its text) replaces the package's files."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, source in (sources or _sources()).items():
        for node, top in _imports(ast.parse(source).body, top=True):
            if top or lazy_too:
                loaded = {
                    p
                    for t in _targets(module, node)
                    for p in _with_packages(t)
                    if p == t or not (module == p or module.startswith(f"{p}."))
                }
                graph[module] |= {t for t in loaded if t in MODULES} - {module}
    return graph


def _private_reaches(sources: dict[str, str]) -> list[str]:
    """``module -> target`` for each import (anywhere in the module) of a
    ``_private`` module or package that belongs to a package ``module`` is not in:
    siblings import what a package exports from its ``__init__`` or its public
    modules."""
    found = []
    for module, source in sources.items():
        for node, _top in _imports(ast.parse(source).body, top=True):
            for target in _targets(module, node):
                parts = target.split(".")
                for i, part in enumerate(parts):
                    owner = ".".join(parts[:i])
                    private = part.startswith("_") and not part.startswith("__")
                    if private and not (module == owner or module.startswith(f"{owner}.")):
                        found.append(f"{module} -> {target}")
                        break
    return sorted(found)


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
    # a circle closed only in a function or for type checking is a circle too
    assert _circles(_graph(lazy_too=True)) == []


def test_the_circle_finder_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_circle_check_sees_function_level_and_type_checking_imports() -> None:
    sources = {
        "azync_flow.client": "from azync_flow.app import attach_workflows\n",
        "azync_flow.app": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from azync_flow.runtime.worker_runtime import WorkflowRuntime\n"
        ),
        "azync_flow.runtime.worker_runtime": (
            "def attach() -> None:\n    from azync_flow.client import Client\n"
        ),
    }
    assert _circles(_graph(lazy_too=False, sources=sources)) == []
    assert _circles(_graph(lazy_too=True, sources=sources)) == [
        ["azync_flow.app", "azync_flow.client", "azync_flow.runtime.worker_runtime"]
    ]


def test_no_module_reaches_into_another_package_private_module() -> None:
    assert _private_reaches(_sources()) == []


def test_the_private_check_sees_a_reach_and_lets_a_package_use_its_own() -> None:
    sources = {
        "azync_flow.schedules._actions": (
            "def start() -> None:\n    from azync_flow.dag._runner import DAGRunner\n"
        ),
        "azync_flow.client": "from azync_flow.events import _worker\n",
        "azync_flow.dag._worker": (
            "from ._runner import DAGRunner\nfrom azync_flow.dag._client import DAGClient\n"
        ),
        "azync_flow.runtime.workflow_runner": (
            "from azync_flow._workflow.context import WorkflowContext\n"
        ),
    }
    assert _private_reaches(sources) == [
        "azync_flow.client -> azync_flow.events._worker",
        "azync_flow.schedules._actions -> azync_flow.dag._runner",
    ]


#: Runtimes of one concern never import another's, nor the composition root
#: (``azync_flow.app``) that ties them; the client imports no runtime; nothing
#: imports the Postgres driver but the driver, the CLI and the testing kit.
ONE_WAY = [
    (
        "azync_flow.replay",
        ("azync_flow.store.postgres", "azync_flow.runtime", "azync_flow._workflow"),
    ),
    ("azync_flow._workflow", ("azync_flow.runtime", "azync_flow.client", "azync_flow.app")),
    (
        "azync_flow.runtime",
        (
            "azync_flow.store.postgres",
            "azync_flow.schedules",
            "azync_flow.dag",
            "azync_flow.events",
            "azync_flow.client",
            "azync_flow.app",
        ),
    ),
    (
        "azync_flow.dag",
        (
            "azync_flow.store.postgres",
            "azync_flow.runtime",
            "azync_flow.schedules",
            "azync_flow.events",
            "azync_flow.client",
            "azync_flow.app",
        ),
    ),
    (
        "azync_flow.schedules",
        (
            "azync_flow.store.postgres",
            "azync_flow.runtime",
            "azync_flow.dag",
            "azync_flow.events",
            "azync_flow.client",
            "azync_flow.app",
        ),
    ),
    ("azync_flow.events", ("azync_flow.store.postgres", "azync_flow.runtime", "azync_flow.app")),
    (
        "azync_flow.client",
        ("azync_flow.store.postgres", "azync_flow.runtime", "azync_flow.app"),
    ),
    ("azync_flow._client_interactions", ("azync_flow.runtime", "azync_flow.app")),
    # The console reads and acts through the client, the DAG and schedule
    # clients and the store's roles: no driver, no runtime, no CLI.
    (
        "azync_flow.console",
        ("azync_flow.store.postgres", "azync_flow.runtime", "azync_flow.app", "azync_flow.cli"),
    ),
    ("azync_flow._local_workflows", ("azync_flow.runtime", "azync_flow.app")),
]


@pytest.mark.parametrize(("package", "forbidden"), ONE_WAY)
def test_dependencies_point_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    assert _wrong(_graph(lazy_too=True), package, forbidden) == []


def test_only_the_cli_the_testing_kit_and_the_public_surface_import_the_composition_root() -> None:
    importers = {m for m, targets in _graph(lazy_too=True).items() if "azync_flow.app" in targets}
    above = ("azync_flow.cli.", "azync_flow.testing.")
    assert sorted(m for m in importers - {"azync_flow"} if not m.startswith(above)) == []


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
