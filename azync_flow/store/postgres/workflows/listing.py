"""Listing executions and announcing finished ones (client ``list`` / ``result``).

Terminal transitions (succeeded, failed, cancelled) send
``NOTIFY <channel>, 'workflow.done:<id>'`` in the transaction that makes them,
so a client waiting for a result wakes when it commits. Answered queries and
decided updates send ``workflow.query:<id>`` / ``workflow.update:<id>``: the
same subscription yields their execution id, so their callers wake too.
Workers ignore these payloads (they are not ``<source>:<kind>`` wakes).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from ....search import search_jsonpath
from ...validate import check_text
from ...workflows import DONE_RESET, SearchFilter, WorkflowExecutionView, WorkflowState
from .._listen import ListenSubscription, open_subscription
from .core import WorkflowCoreMixin, execution_from_row
from .interaction import QUERY_PREFIX, UPDATE_PREFIX

__all__ = ["DONE_PREFIX", "WorkflowDoneSubscription", "WorkflowListingMixin"]

DONE_PREFIX = "workflow.done:"
#: Item sent once LISTEN is live again after a reconnect: re-check every waiter.
_PREFIXES = (DONE_PREFIX, QUERY_PREFIX, UPDATE_PREFIX)


class WorkflowDoneSubscription(ListenSubscription[uuid.UUID]):
    """Ids of executions that reached a terminal state (or had a query answered
    or an update decided); ``DONE_RESET`` after a reconnect (notifications may
    have been missed: re-read)."""

    _task_name = "azync-workflow-done-listener"

    def _decode(self, payload: str) -> uuid.UUID | None:
        for prefix in _PREFIXES:
            if payload.startswith(prefix):
                try:
                    return uuid.UUID(payload[len(prefix) :])
                except ValueError:
                    return None
        return None

    async def _after_connect(self, conn: asyncpg.Connection, *, reconnected: bool) -> None:
        if reconnected:
            self._put(DONE_RESET)


class WorkflowListingMixin(WorkflowCoreMixin):
    async def list_workflow_executions(
        self,
        *,
        name: str | None = None,
        state: WorkflowState | str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
        where: Sequence[SearchFilter] = (),
    ) -> list[WorkflowExecutionView]:
        """Executions, newest first (``created_at``, then id, descending), each with
        its ``blocked_reason`` as :meth:`get_workflow_execution` computes it.

        Args:
            name: only this workflow name.
            state: only this state (running, suspended, succeeded, failed, cancelled).
            limit: page size (>= 1).
            before: keyset cursor ``(created_at, id)`` of the last row of the
                previous page; None starts at the newest.
            where: search attribute filters, all of which must hold
                (``azync_flow.search``); one jsonpath predicate in SQL.

        Raises:
            ValueError: ``limit`` < 1, an unknown state, or a ``name`` that
                :func:`~azync_flow.store.validate.check_text` refuses.
            SearchAttributeError: a filter of a bad name, operator or value
                (also a ``ValueError``).
        """
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if name is not None:
            check_text(name, "workflow name")
        state_value = None if state is None else WorkflowState(state).value
        args: list[Any] = [
            name,
            state_value,
            limit,
            before[0] if before else None,
            before[1] if before else None,
        ]
        if where:
            rows = await self._fetch("workflow_list_search", *args, search_jsonpath(where))
        else:
            rows = await self._fetch("workflow_list", *args)
        return [execution_from_row(r) for r in rows]

    async def workflow_done_events(self) -> WorkflowDoneSubscription | None:
        """A stream of ids of executions that just finished (None when poll-only).

        LISTEN is live when this returns. Close it to release its dedicated connection.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        return await open_subscription(self, WorkflowDoneSubscription)
