"""Answers workflow queries on a worker, writing no history.

Per claimed query (the ``$query`` loop of the worker; claims are rows of the
query table, not jobs — the loop only borrows the worker's leasing, wake-up
and shutdown machinery)::

    if runner.busy(run_id):                          # a pass runs or commits now
        answer = fresh_instance(committed history).query(...)   # never waits on it
    else:
        async with runner.serialized(run_id):        # free: taken at once
            cached = cache.take(run_id)              # put back untouched afterwards
            state  = store.load_workflow_task(run_id, after_seq=<cached position>)
            answer = cached.query(...)               # when nothing new was recorded
                  or fresh_instance(full history).query(...)   # else: a full replay
    store.answer_workflow_query(query_id, answer)

Each gives the state after the whole committed history (a pass inside its
commit is not visible to the load), so the answer depends neither on the cache
nor on a pass in flight, and a slow commit never delays a query.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from azync_flow.errors import NonDeterminismError, QueryError
from azync_flow.replay.engine import WorkflowInstance
from azync_flow.replay.outcome import PassStatus, WorkflowInfo, safe_message
from azync_flow.replay.passes import to_entries
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.queue import Job, JobState, Source
from azync_flow.store.workflows import (
    QueryAnswer,
    QueryClaim,
    WorkflowInteractionStore,
    WorkflowRuntimeStore,
    WorkflowTaskState,
)

__all__ = ["QUERY_KIND", "QUERY_LEASE", "QueryResponder", "QueryStore"]

log = logging.getLogger("azync_flow.workflow")

#: Kind of the worker loop answering queries (and of its wake-ups).
QUERY_KIND = "$query"
#: Lease the loop gives a claim: long, since a claim is a row, not a job, and
#: must never be heartbeated (the query's own deadline bounds it).
QUERY_LEASE = timedelta(hours=1)


@runtime_checkable
class QueryStore(WorkflowRuntimeStore, WorkflowInteractionStore, Protocol):
    """The store verbs a query responder uses: loads and the query verbs."""


class QueryResponder:
    """Claims and answers the queries of the workflows ``runner`` registers.

    Args:
        runner: the worker's workflow runner (registry, sticky cache, pass locks).
        store: the runner's store, with the query verbs.
    """

    def __init__(self, runner: WorkflowRunner, store: QueryStore) -> None:
        self.runner = runner
        self.store = store
        self._claims: dict[uuid.UUID, QueryClaim] = {}
        #: Queries answered from a cached instance / by a full replay.
        self.from_cache = 0
        self.replayed = 0

    async def dequeue(self, limit: int, lease: timedelta) -> list[Job]:
        """The loop's lease query: claim pending queries, one job-shaped item each."""
        claims = await self.store.claim_workflow_queries(
            sorted(self.runner.registry.workflows), limit
        )
        jobs = []
        for claim in claims:
            self._claims[claim.id] = claim
            jobs.append(
                Job(
                    id=claim.id,
                    source=Source.WORKFLOW,
                    kind=QUERY_KIND,
                    state=JobState.ACTIVE,
                    run_id=claim.workflow_id,
                    task_key=claim.name,
                    lease_token=uuid.uuid4(),
                )
            )
        return jobs

    async def run(self, job: Job, lease: Any) -> None:
        """``JobRunner``: answer the claimed query ``job.id`` and record the answer."""
        claim = self._claims.pop(job.id)
        answer = await self.answer(claim)
        if not await self.store.answer_workflow_query(claim.id, answer):
            log.debug("query %s of %s was withdrawn before its answer", claim.id, claim.workflow_id)

    async def answer(self, claim: QueryClaim) -> QueryAnswer:
        """The answer to ``claim`` (a failed answer carries the error's type and message)."""
        try:
            data = await self._answer(claim)
        except Exception as exc:
            # a QueryError's detail alone: the client wraps it in the same error again
            message = exc.detail if isinstance(exc, QueryError) else safe_message(exc)
            return QueryAnswer(state="failed", error_type=type(exc).__name__, message=message)
        return QueryAnswer(state="answered", answer=data)

    async def _answer(self, claim: QueryClaim) -> bytes:
        runner = self.runner
        run_id = claim.workflow_id
        if runner.busy(run_id):
            # A pass holds the instance (its in-memory state may be uncommitted):
            # replay what is committed instead of waiting for the pass.
            self.replayed += 1
            return self._replay_and_query(claim, await self.store.load_workflow_task(run_id))
        async with runner.serialized(run_id):
            cached = runner.cache.take(run_id)
            try:
                after = cached.next_seq - 1 if cached is not None else 0
                state = await self.store.load_workflow_task(run_id, after_seq=after)
                same_run = cached is not None and cached.info.current_run_id == (
                    state.execution.run_id or run_id
                )  # a reset can start a new run at the same next_seq
                if cached is not None and same_run and cached.next_seq == state.next_seq:
                    self.from_cache += 1
                    return cached.query(claim.name, claim.args)
                if cached is not None:  # events were recorded since its last pass
                    state = await self.store.load_workflow_task(run_id)
            finally:
                if cached is not None:
                    runner.cache.put(run_id, cached)
        self.replayed += 1
        return self._replay_and_query(claim, state)

    def _replay_and_query(self, claim: QueryClaim, state: WorkflowTaskState) -> bytes:
        runner = self.runner
        execution = state.execution
        instance = WorkflowInstance(
            runner.registry.workflow(execution.name),
            execution.input,
            WorkflowInfo.of(
                execution.id,
                execution.name,
                execution.version,
                execution.meta,
                run_id=execution.run_id,
                parent_id=execution.parent_id,
                task_queue=execution.task_queue,
                priority=execution.priority,
            ),
            max_payload_bytes=runner.max_payload_bytes,
            task_context=runner.task_context(),
        )
        try:
            outcome = instance.advance(to_entries(state.history), now=state.now)
            if outcome.status is PassStatus.NONDETERMINISM:
                assert isinstance(outcome.error, NonDeterminismError)
                raise outcome.error
            return instance.query(claim.name, claim.args)
        finally:
            instance.close()
