"""Queue job verbs of ``Store``: enqueue, lease, settle (contract ``Store``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import asyncpg

from ..types import DequeueParams, EnqueueParams, Job, Source
from ._base import PgBase, encode_meta, job_from_row


class QueueMixin(PgBase):
    async def enqueue(self, p: EnqueueParams) -> bool:
        """Insert one queue job; return False when deduplicated by its idempotency key.

        Contract ``Store.Enqueue``: the live-key check always applies; a
        positive ``idempotency_ttl`` adds a time-window reservation that keeps
        the key rejected until it expires, whatever the prior job's state.
        Workers are woken (NOTIFY) on commit when the job is due now.
        """
        async with self.pool.acquire() as conn:
            if p.idempotency_key and p.idempotency_ttl > timedelta(0):
                async with conn.transaction():
                    return await self.enqueue_tx(conn, p)
            return await self.enqueue_tx(conn, p)

    async def enqueue_tx(self, conn: asyncpg.Connection, p: EnqueueParams) -> bool:
        """Contract ``TxStore.EnqueueTx``: :meth:`enqueue` inside the caller's transaction.

        With an idempotency TTL the caller's connection must be in a
        transaction, so a rejected insert does not leave a reserved key behind.
        """
        if p.idempotency_key and p.idempotency_ttl > timedelta(0):
            reserved = await self._fetchrow(
                "job_idempotency_reserve",
                Source.QUEUE.value,
                p.kind,
                p.idempotency_key,
                p.idempotency_ttl,
                conn=conn,
            )
            if reserved is None:
                return False
        row = await self._fetchrow(
            "job_enqueue",
            p.id,
            Source.QUEUE.value,
            p.kind,
            p.payload,
            encode_meta(p.meta),
            p.run_at,
            p.delay,
            p.max_attempts,
            p.max_attempts_explicit,
            p.idempotency_key,
            self.channel,
            conn=conn,
        )
        assert row is not None
        return bool(row["inserted"])

    async def dequeue_batch(self, source: Source, p: DequeueParams) -> list[Job]:
        """Lease up to ``p.limit`` due pending jobs of ``(source, p.kind)``, oldest first.

        Contract ``Store.DequeueBatch``: ``FOR UPDATE SKIP LOCKED``; each job's
        attempt is incremented, a fresh lease token minted and its retry budget
        resolved durably on the first lease.
        """
        if p.limit <= 0:
            return []
        rows = await self._fetch(
            "job_dequeue",
            source.value,
            p.kind,
            p.limit,
            p.lease,
            p.default_max_attempts,
            p.override_default,
        )
        jobs = [job_from_row(r) for r in rows]
        jobs.sort(key=lambda j: (j.run_at, j.id))
        return jobs

    async def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Settle an active job as succeeded. Raises NotFoundError on a stale token."""
        await self._must("job_ack", id, lease_token, what=_stale(id))

    async def ack_many(self, items: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
        """Ack several ``(id, lease_token)`` pairs in one statement.

        Returns the ids acked; a pair whose token is stale is skipped, not raised.
        """
        if not items:
            return set()
        rows = await self._fetch("job_ack_many", [i for i, _ in items], [t for _, t in items])
        return {r["id"] for r in rows}

    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None:
        """Park a failed job as scheduled at backend now()+delay and record the attempt."""
        await self._must("job_reschedule", id, lease_token, delay, last_error, what=_stale(id))

    async def dead(self, id: uuid.UUID, lease_token: uuid.UUID, last_error: str) -> None:
        """Dead-letter an active job and record its final attempt."""
        await self._must("job_dead", id, lease_token, last_error, what=_stale(id))

    async def release(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Return a leased job to pending, giving back the attempt it used."""
        await self._must("job_release", id, lease_token, what=_stale(id))

    async def extend_lease(self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta) -> None:
        """Renew an active job's lease to backend now()+lease (a heartbeat)."""
        await self._must("job_extend_lease", id, lease_token, lease, what=_stale(id))


def _stale(id: uuid.UUID) -> str:
    return (
        f"job {id} is not active under this lease token (it was settled, reaped or "
        "re-leased); the settle was not applied"
    )
