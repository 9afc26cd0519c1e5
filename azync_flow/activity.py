"""Activity code: what an ``@activity`` function and its reconcile hook write.

This module is the ``@activity`` decorator itself: calling it declares an
activity, so both spellings work and name the same object::

    from azync_flow import activity                       # the decorator (this module)
    from azync_flow.activity import current_activity      # what activity code uses

    @activity(name="charge", idempotent=False, reconcile=look_up_charge)
    async def charge(order: Order) -> str:
        info = current_activity()                          # attempt, execution key, heartbeat
        ...

``activity(fn)`` / ``activity(*, name=None, version="1", retry=None,
start_to_close=None, heartbeat_timeout=None, idempotent=True, reconcile=None)``
returns an :class:`ActivityDefinition` (see docs/workflows.md); a reconcile
hook returns :class:`Reconciled` (docs/uncertain.md).

``transaction(fn)`` / ``transaction(*, name=None, version="1", retry=None,
start_to_close=None, isolation="read_committed", task_queue=None,
priority=None)`` declares a transactional step: ``async def f(conn, *args)``
whose SQL on ``conn`` commits with its recorded result (docs/workflows.md,
"Transactional steps").
"""

from __future__ import annotations

import sys
import types
from typing import Any

from azync_flow._workflow.attempt import ActivityInfo, current_activity
from azync_flow._workflow.definitions import ActivityDefinition
from azync_flow._workflow.definitions import activity as _declare
from azync_flow._workflow.reconcile import Reconciled
from azync_flow._workflow.transactional import TransactionDefinition, transaction

__all__ = [
    "ActivityDefinition",
    "ActivityInfo",
    "Reconciled",
    "TransactionDefinition",
    "current_activity",
    "transaction",
]


class _ActivityModule(types.ModuleType):
    """The type of this module: calling it is ``@activity``."""

    def __call__(self, fn: Any = None, /, **options: Any) -> Any:
        return _declare(fn, **options)


sys.modules[__name__].__class__ = _ActivityModule
