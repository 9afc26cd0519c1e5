"""The error tree drawn in azync_flow.errors' docstring is the tree the code defines."""

from __future__ import annotations

import re

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


def test_old_import_paths_name_the_same_classes() -> None:
    from azync_flow import dag, worker
    from azync_flow.replay import HistoryFileError
    from azync_flow.store import errors as store_errors

    assert store_errors.StoreError is errors.StoreError
    assert store_errors.AzyncError is errors.AzyncError
    assert dag.Skip is worker.Skip is errors.Skip
    assert dag.DAGValidationError is errors.DAGValidationError
    assert worker.LeaseLost is errors.LeaseLost
    assert HistoryFileError is errors.HistoryFileError
