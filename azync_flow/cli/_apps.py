"""`APP` of `worker` and `replay`: `module` or `module:attr`, imported the
way `python -m` would (the current directory first on the import path)."""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable
from typing import Any

from azync_flow.activity import ActivityDefinition
from azync_flow.workflow import Registry, WorkflowDefinition

from ._common import CliError

__all__ = ["AppParts", "app_parts", "load_app"]

#: `(workflows, activities, queue handlers by kind)` an APP provides.
AppParts = tuple[
    list[WorkflowDefinition[Any, Any]], list[ActivityDefinition[Any, Any]], dict[str, Any]
]

_PARTS = ("workflows", "activities", "handlers")


def load_app(target: str) -> Any:
    """Import `module` (the module itself) or `module:attr` (a dotted attribute).

    The current directory goes first on `sys.path`, as with `python -m`,
    so a user's `myapp.py` imports from where the command runs.

    Raises:
        CliError: malformed target, import failure (the module is missing, has
            a syntax error or raises while it runs), or no such attribute.
    """
    module_name, sep, attr = target.partition(":")
    if not module_name or (sep and not attr):
        raise CliError(f"APP must be module or module:attribute, got {target!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: a syntax error or a failing body too
        raise CliError(
            f"cannot import {module_name!r} (from {cwd}): {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(f"{module_name} has no attribute {attr!r}") from None
    return obj


def is_app(obj: Any) -> bool:
    """True for what :func:`app_parts` understands (not a Worker or a factory)."""
    if isinstance(obj, (Registry, types.ModuleType, WorkflowDefinition, ActivityDefinition)):
        return True
    if isinstance(obj, (list, tuple)):
        return True
    return any(hasattr(obj, a) for a in _PARTS)


def _values(items: Any) -> list[Any]:
    if isinstance(items, dict):
        return list(items.values())
    return list(items or ())


def app_parts(obj: Any) -> AppParts:
    """What an APP provides: a module (its `workflows`/`activities`/`handlers`
    attributes, else every definition it holds), a `Registry`, one definition,
    a list of definitions, or any object with those attributes."""
    if isinstance(obj, WorkflowDefinition):
        return [obj], [], {}
    if isinstance(obj, ActivityDefinition):
        return [], [obj], {}
    if isinstance(obj, Registry):
        return list(obj.workflows.values()), list(obj.activities.values()), {}
    if isinstance(obj, (list, tuple)):
        return _split(obj)
    if isinstance(obj, types.ModuleType):
        return _module_parts(obj)
    workflows = getattr(obj, "workflows", ())
    if isinstance(workflows, Registry):
        return app_parts(workflows)
    return (
        _values(workflows),
        _values(getattr(obj, "activities", ())),
        dict(getattr(obj, "handlers", None) or {}),
    )


def _module_parts(module: types.ModuleType) -> AppParts:
    """A module's parts: each of `workflows`/`activities`/`handlers` from its
    attribute when it has one, else (workflows, activities) every definition
    it holds; a module with only `handlers` still runs its definitions."""
    workflows = getattr(module, "workflows", None)
    if isinstance(workflows, Registry):
        return app_parts(workflows)
    found_workflows, found_activities, _ = _split(vars(module).values())
    return (
        found_workflows if workflows is None else _values(workflows),
        found_activities if not hasattr(module, "activities") else _values(module.activities),
        dict(getattr(module, "handlers", None) or {}),
    )


def _split(values: Iterable[Any]) -> AppParts:
    values = list(values)
    workflows = [v for v in values if isinstance(v, WorkflowDefinition)]
    activities = [v for v in values if isinstance(v, ActivityDefinition)]
    registries = [v for v in values if isinstance(v, Registry)]
    if not workflows and not activities and len(registries) == 1:
        return app_parts(registries[0])
    return workflows, activities, {}
