"""Workflow code: what a ``@workflow`` function and the code around it write.

This module is the ``@workflow`` decorator itself: calling it declares a
workflow, so both spellings work and name the same object::

    from azync_flow import workflow                   # the decorator (this module)
    from azync_flow.workflow import WorkflowContext   # what workflow code uses

    @workflow(name="order", version="1")
    async def order(ctx: WorkflowContext, o: Order) -> str: ...

``workflow(fn)`` / ``workflow(*, name=None, version="", schedule=None, tz="UTC")``
returns a :class:`WorkflowDefinition` (see docs/workflows.md). Activities are
declared with :mod:`azync_flow.activity`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from azync_flow._workflow.children import ChildHandle, ParentClosePolicy
from azync_flow._workflow.context import WorkflowContext
from azync_flow._workflow.definitions import (
    ActivityOptions,
    Registry,
    WorkflowDefinition,
)
from azync_flow._workflow.definitions import workflow as _declare
from azync_flow._workflow.limits import HistoryLimit

__all__ = [
    "ActivityOptions",
    "ChildHandle",
    "HistoryLimit",
    "ParentClosePolicy",
    "Registry",
    "WorkflowContext",
    "WorkflowDefinition",
]


class _WorkflowModule(types.ModuleType):
    """The type of this module: calling it is ``@workflow``."""

    def __call__(self, fn: Any = None, /, **options: Any) -> Any:
        return _declare(fn, **options)


sys.modules[__name__].__class__ = _WorkflowModule
