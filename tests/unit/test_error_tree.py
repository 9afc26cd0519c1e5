"""The error tree drawn in azync_flow.errors' docstring is the tree the code
defines, and azync_flow.errors is the one home of every public error."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import azync_flow
import azync_flow.errors as errors


def _drawn_edges() -> set[tuple[str, str]]:
    """(parent, child) pairs of the docstring's tree, from each node's indentation."""
    doc = errors.__doc__ or ""
    tree = doc.split("Tree::", 1)[1].split("\n\n", 2)
    edges: set[tuple[str, str]] = set()
    for block in (tree[1], tree[2].split("\n\n", 1)[0]):
        stack: list[tuple[int, str]] = []
        for line in block.splitlines():
            m = re.match(r"^(?P<lead>[ │]*(?:[├└]── )?)(?P<name>[A-Z][A-Za-z]+)", line)
            if not m:
                continue
            depth = len(m.group("lead"))
            while stack and stack[-1][0] >= depth:
                stack.pop()
            if stack:
                edges.add((stack[-1][1], m.group("name")))
            stack.append((depth, m.group("name")))
    return edges


def _classes() -> dict[str, type[BaseException]]:
    return {
        name: obj
        for name in errors.__all__
        if isinstance(obj := getattr(errors, name), type) and issubclass(obj, BaseException)
    }


def _public_modules() -> list[str]:
    """Every module of the package whose dotted path has no ``_``-private part."""
    return [
        "azync_flow",
        *(
            m.name
            for m in pkgutil.walk_packages(azync_flow.__path__, "azync_flow.")
            if not any(part.startswith("_") for part in m.name.split("."))
        ),
    ]


def _public_exceptions() -> dict[str, set[type[BaseException]]]:
    """Public module -> the exception classes it defines or exports in ``__all__``."""
    found: dict[str, set[type[BaseException]]] = {}
    for name in _public_modules():
        module = importlib.import_module(name)
        names = set(getattr(module, "__all__", ())) | {
            n for n, obj in vars(module).items() if getattr(obj, "__module__", None) == name
        }
        found[name] = {
            obj
            for n in names
            if inspect.isclass(obj := getattr(module, n)) and issubclass(obj, BaseException)
        }
    return found


def test_the_docstring_tree_matches_the_class_hierarchy() -> None:
    classes = _classes()
    in_tree = {*classes, "BaseException"}
    coded = {
        (base.__name__, name)
        for name, cls in classes.items()
        for base in cls.__bases__
        if base.__name__ in in_tree
    }
    assert _drawn_edges() == coded


def test_every_public_error_and_signal_has_its_own_stable_code() -> None:
    for name, cls in _classes().items():
        code = cls.__dict__.get("code")
        assert isinstance(code, str), name
        assert re.fullmatch(r"[a-z_]+", code), name
    assert str(errors.NotFoundError("gone")) == "[not_found] gone"


def test_every_public_error_of_the_package_is_defined_in_errors_under_the_root() -> None:
    signals = {errors.Snooze, errors.Skip, errors.NotReady, errors.WorkflowAbort}
    signals.add(errors.ContinueAsNew)
    defined = {cls for found in _public_exceptions().values() for cls in found}
    assert {cls.__module__ for cls in defined} == {"azync_flow.errors"}
    assert defined <= set(_classes().values())
    for cls in _classes().values():
        assert issubclass(cls, errors.AzyncError) or cls in signals, cls
    drawn = {name for edge in _drawn_edges() for name in edge} - {"BaseException"}
    assert drawn == set(_classes())


def test_only_errors_and_the_package_root_export_error_classes() -> None:
    exporting = {
        name
        for name, found in _public_exceptions().items()
        if found and name not in ("azync_flow", "azync_flow.errors")
    }
    assert exporting == set()


def test_the_walk_sees_errors_defined_outside_errors() -> None:
    assert "azync_flow.errors" in _public_modules()
    assert "azync_flow.cli._common" not in _public_modules()
    assert errors.AzyncError in _public_exceptions()["azync_flow"]
