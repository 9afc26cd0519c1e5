"""Queries and updates of workflow executions (PostgreSQL driver).

* Queries are short-lived rows: ``request_workflow_query`` inserts one and
  NOTIFYs ``workflow:$query``; a worker registering the workflow claims it
  (``claim_workflow_queries``), answers it (``answer_workflow_query``, which
  NOTIFYs ``workflow.query:<execution id>``); the caller takes the answer
  (``take_workflow_query``, deleting the row). Nothing touches history.
* Update requests travel through the signal inbox; their outcomes are kept
  by the pass commit that decided them (``azync_workflow_pass_commit``,
  NOTIFYing ``workflow.update:<execution id>``) and
  read with ``get_workflow_update``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ....errors import NotFoundError
from ...validate import check_choice, check_name
from ...workflows import QueryAnswer, QueryClaim, QueryRequest, UpdateOutcome
from .._base import PgBase

__all__ = ["QUERY_PREFIX", "UPDATE_PREFIX", "WorkflowInteractionMixin"]

#: Notification payload prefixes (the execution id follows) waking callers.
QUERY_PREFIX = "workflow.query:"
UPDATE_PREFIX = "workflow.update:"
#: States an answer leaves a claimed query in.
_ANSWERED = frozenset({"answered", "failed"})
#: States of a kept update outcome (the schema admits these, no other).
_UPDATE_STATES = frozenset({"rejected", "completed", "failed"})


class WorkflowInteractionMixin(PgBase):
    async def request_workflow_query(self, p: QueryRequest) -> str:
        """Insert a pending query of execution ``p.workflow_id`` (running or
        finished) and wake the workers, in one statement.

        Returns:
            The execution's workflow name (the workers registering it answer).

        Raises:
            NotFoundError: no such execution.
            ValueError: ``p.name`` is empty, over 255 characters, or not valid text.
        """
        check_name(p.name, "query name")
        row = await self._fetchrow(
            "workflow_query_request",
            p.id,
            p.workflow_id,
            p.name,
            p.args,
            p.timeout,
            self.channel,
        )
        if row is None:
            raise NotFoundError(f"workflow execution {p.workflow_id} does not exist")
        return str(row["workflow_name"])

    async def claim_workflow_queries(
        self, workflow_names: Sequence[str], limit: int
    ) -> list[QueryClaim]:
        """Implements ``WorkflowInteractionStore.claim_workflow_queries`` (documented there)."""
        if limit <= 0 or not workflow_names:
            return []
        rows = await self._fetch("workflow_query_claim", list(workflow_names), limit)
        return [
            QueryClaim(
                id=r["id"],
                workflow_id=r["workflow_id"],
                workflow_name=r["workflow_name"],
                name=r["name"],
                args=bytes(r["args"]),
            )
            for r in rows
        ]

    async def answer_workflow_query(self, query_id: uuid.UUID, answer: QueryAnswer) -> bool:
        """Record the answer (``answer.state``: answered or failed) of a claimed
        query and wake its caller.

        Returns:
            False when the caller withdrew the query meanwhile (nothing written).

        Raises:
            ValueError: ``answer.state`` is neither ``answered`` nor ``failed``;
                nothing written.
        """
        check_choice(answer.state, "query answer state", _ANSWERED)
        row = await self._fetchrow(
            "workflow_query_answer",
            query_id,
            answer.state,
            answer.answer,
            answer.error_type,
            answer.message,
            self.channel,
        )
        return row is not None

    async def take_workflow_query(
        self, query_id: uuid.UUID, *, withdraw: bool = False
    ) -> QueryAnswer | None:
        """Delete an answered query and return its answer; None while it is not
        answered. With ``withdraw`` the query is deleted whatever its state (a
        worker that claimed it then cannot answer) and returned as it was."""
        row = await self._fetchrow("workflow_query_take", query_id, withdraw)
        if row is None:
            return None
        answer = row["answer"]
        return QueryAnswer(
            state=row["state"],
            answer=None if answer is None else bytes(answer),
            error_type=row["error_type"],
            message=row["message"],
        )

    async def get_workflow_update(
        self, workflow_id: uuid.UUID, update_id: str
    ) -> UpdateOutcome | None:
        """Implements ``WorkflowInteractionStore.get_workflow_update`` (documented there)."""
        row = await self._fetchrow("workflow_update_get", workflow_id, update_id)
        if row is None:
            return None
        result = row["result"]
        return UpdateOutcome(
            update_id=update_id,
            name=row["name"],
            state=row["state"],
            result=None if result is None else bytes(result),
            error_type=row["error_type"],
            message=row["message"],
        )


def check_update_outcomes(outcomes: Sequence[UpdateOutcome]) -> None:
    """The checks of a pass's update outcomes before its commit.

    Raises:
        ValueError: an outcome's state is not ``rejected``, ``completed`` or
            ``failed`` (nothing is written).
    """
    for o in outcomes:
        check_choice(o.state, f"state of update {o.update_id!r}", _UPDATE_STATES)
