"""Queue verbs of the PostgreSQL driver (contract :mod:`azync_flow.store.queue`):
enqueue, lease, settle, promote and reap jobs, and push wake-ups.

Producers NOTIFY ``Config.notify_channel`` with the payload ``"<source>:<kind>"``
inside their own transaction, so a wake is delivered only after the commit
that made the work visible: enqueue (a due job), publish (one per delivered
subscriber), promote_due, reap_expired (re-pended kinds), run_now and the retry
verbs. A :class:`WakeSubscription` listens on a dedicated connection and
reconnects when it drops; wakes that may have been missed during the gap are
replayed as one wake per ``(source, kind)`` that has pending jobs.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import timedelta

import asyncpg

from ..._text import clean_text
from ...errors import ConflictError
from ..queue import (
    DequeueParams,
    EnqueueParams,
    Job,
    LimitSpec,
    LimitUsage,
    Source,
    Wake,
)
from ..validate import (
    check_limits,
    check_max_attempts,
    check_meta,
    check_name,
    check_priority,
    check_task_queue,
    check_task_queue_limit,
    check_text,
)
from ._base import PgBase, encode_meta, job_from_row, lease_order, stale_lease
from ._guard import translate
from ._listen import ListenSubscription, open_subscription, parse_wake
from ._queries import QUERIES

__all__ = [
    "LimitMixin",
    "NotifyMixin",
    "QueueMixin",
    "WakeSubscription",
]


class QueueMixin(PgBase):
    async def enqueue(self, p: EnqueueParams) -> bool:
        """Insert one queue job; return False when deduplicated by its idempotency key.

        Contract ``Store.Enqueue``: the live-key check (a key is rejected while
        a job holding it is pending, scheduled, active or paused) always
        applies; a positive ``idempotency_ttl`` adds a time-window reservation
        that keeps the key rejected until it expires, whatever the prior job's
        state. ``run_at``/``delay`` resolve against the backend clock. Workers
        are woken (NOTIFY ``queue:<kind>``) on commit when the job is due now.

        Raises:
            ConflictError: a job with the same ``id`` already exists.
        """
        async with self.connection() as conn:
            return await self.enqueue_tx(conn, p)

    async def enqueue_tx(self, tx: asyncpg.Connection, p: EnqueueParams) -> bool:
        """Contract ``TxStore.EnqueueTx``: :meth:`enqueue` on the caller's connection.

        When ``tx`` (a connection) is inside a transaction the job, its TTL reservation and
        its wake commit or roll back with it. One statement.

        Raises:
            ConflictError: a job with the same ``id`` already exists.
            ValueError: ``max_attempts_explicit`` with ``max_attempts`` < 1; ``kind``,
                ``idempotency_key`` or ``meta`` contain NUL; ``kind`` is too long.
        """
        _check_enqueue(p)
        try:
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
                p.snooze_budget,
                p.idempotency_ttl,
                check_task_queue(p.task_queue),
                p.priority,
                p.limit_key,
                conn=tx,
            )
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(f"job {p.id} already exists") from exc
        assert row is not None
        return bool(row["inserted"])

    async def enqueue_many(self, ps: Sequence[EnqueueParams]) -> list[bool]:
        """Insert many queue jobs in one statement (one transaction).

        Contract ``Store.EnqueueMany``: each item is enqueued as :meth:`enqueue`
        would, in order, so an item whose key a live job (or an unexpired TTL
        window) holds, or an earlier item of the batch already took, is
        deduplicated and writes nothing. Every item is checked before anything
        is sent: one bad item writes nothing. Workers of each due kind are woken
        once, on commit.

        Args:
            ps: the jobs; an empty sequence writes nothing.

        Returns:
            Per item, in order: True when inserted, False when deduplicated.

        Raises:
            ConflictError: a job with the id of an item already exists, or two
                items share an id (nothing written).
            ValueError: as :meth:`enqueue_tx` (nothing written).
        """
        if not ps:
            return []
        async with self.connection() as conn:
            return await self.enqueue_many_tx(conn, ps)

    async def enqueue_many_tx(
        self, tx: asyncpg.Connection, ps: Sequence[EnqueueParams]
    ) -> list[bool]:
        """Contract ``TxStore.EnqueueManyTx``: :meth:`enqueue_many` on the caller's
        connection; inside a transaction the jobs, their TTL reservations and
        their wakes commit or roll back with it.

        Raises:
            ConflictError: as :meth:`enqueue_many`.
            ValueError: as :meth:`enqueue_tx` (nothing written).
        """
        for p in ps:
            _check_enqueue(p)
        if not ps:
            return []
        # Only the first item of a (kind, key) can insert: a later one meets
        # that item's job, or whatever deduplicated it (enqueue, in order).
        firsts: dict[tuple[str, str], EnqueueParams] = {}
        sent = [p for p in ps if not p.idempotency_key or firsts.setdefault(_key(p), p) is p]
        try:
            rows = await self._fetch(
                "job_enqueue_many",
                [p.id for p in sent],
                Source.QUEUE.value,
                [p.kind for p in sent],
                [p.payload for p in sent],
                [encode_meta(p.meta) for p in sent],
                [p.run_at for p in sent],
                [p.delay for p in sent],
                [p.max_attempts for p in sent],
                [p.max_attempts_explicit for p in sent],
                [p.idempotency_key for p in sent],
                self.channel,
                [p.snooze_budget for p in sent],
                [p.idempotency_ttl for p in sent],
                [check_task_queue(p.task_queue) for p in sent],
                [p.priority for p in sent],
                [p.limit_key for p in sent],
                conn=tx,
            )
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(
                f"a job with the id of one of {len(ps)} jobs already exists, or two share "
                "an id; nothing was enqueued"
            ) from exc
        except Exception as exc:  # the caller's connection is not guarded by our pool
            if (err := translate(exc, self.schema)) is None:
                raise
            raise err from exc
        inserted = {r["id"] for r in rows}
        return [p.id in inserted and (not p.idempotency_key or firsts[_key(p)] is p) for p in ps]

    async def dequeue_batch(self, source: Source, p: DequeueParams) -> list[Job]:
        """Lease up to ``p.limit`` due pending jobs of ``(source, p.kind)`` routed to
        one of ``p.task_queues``, oldest first.

        Contract ``Store.DequeueBatch``: ``FOR UPDATE SKIP LOCKED``; each job's
        attempt is incremented, a fresh lease token minted and its retry budget
        resolved durably on the first lease. For ``Source.EVENT`` (``p.kind`` is
        the subscriber name) each job's ``event`` is rehydrated from the ledger.
        """
        if p.limit <= 0:
            return []
        if source is Source.EVENT:
            rows = await self._fetch(
                "event_dequeue",
                p.kind,
                p.limit,
                p.lease,
                p.default_max_attempts,
                p.override_default,
            )
        else:
            rows = await self._fetch(
                "job_dequeue",
                source.value,
                p.kind,
                p.limit,
                p.lease,
                p.default_max_attempts,
                p.override_default,
                list(p.task_queues),
                self.channel,
            )
        # the statement's lease order (a RETURNING list comes back unordered)
        return sorted((job_from_row(r) for r in rows), key=lease_order)

    async def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Settle an active job as succeeded. Raises NotFoundError on a stale token."""
        await self._must("job_ack", id, lease_token, what=stale_lease(id))

    async def ack_many(self, items: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
        """``JobSettler.ack_many``: ack several ``(id, lease_token)`` pairs in one statement."""
        if not items:
            return set()
        rows = await self._fetch("job_ack_many", [i for i, _ in items], [t for _, t in items])
        return {r["id"] for r in rows}

    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None:
        """Park a failed job as scheduled at backend now()+delay and record the attempt."""
        await self._must(
            "job_reschedule", id, lease_token, delay, clean_text(last_error), what=stale_lease(id)
        )

    async def dead(self, id: uuid.UUID, lease_token: uuid.UUID, last_error: str) -> None:
        """Dead-letter an active job and record its final attempt."""
        await self._must("job_dead", id, lease_token, clean_text(last_error), what=stale_lease(id))

    async def release(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Return a leased job to pending, giving back the attempt it used."""
        await self._must("job_release", id, lease_token, what=stale_lease(id))

    async def release_blocked(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        delay: timedelta = timedelta(0),
    ) -> None:
        """Implements ``JobSettler.release_blocked`` (documented there)."""
        await self._must(
            "job_release_blocked",
            id,
            lease_token,
            clean_text(reason),
            delay,
            what=stale_lease(id),
        )

    async def extend_lease(self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta) -> None:
        """Renew an active job's lease to backend now()+lease (a heartbeat)."""
        await self._must("job_extend_lease", id, lease_token, lease, what=stale_lease(id))

    async def skip(self, id: uuid.UUID, lease_token: uuid.UUID, reason: str) -> None:
        """``JobSettler.skip``: settle an active job as skipped."""
        await self._must("job_skip", id, lease_token, clean_text(reason), what=stale_lease(id))

    async def snooze(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        delay: timedelta,
        deadline_error: str,
    ) -> bool:
        """Park an active job as scheduled at backend now()+delay (contract ``Snooze``).

        The attempt the lease used is given back (floored at 0) and no attempt
        is recorded, so snoozing never spends the retry budget. For a job with
        a snooze budget the FIRST snooze stamps ``deadline_at = now()+budget``;
        a snooze settled after that deadline dead-letters the job instead,
        recording the attempt with ``deadline_error``.

        Returns:
            True when the job was dead-lettered for its deadline, else False.

        Raises:
            NotFoundError: the token no longer owns an active row (nothing changed).
        """
        row = await self._must(
            "job_snooze", id, lease_token, delay, clean_text(deadline_error), what=stale_lease(id)
        )
        return bool(row["state"] == "dead")

    async def promote_due(self, source: Source, kinds: Sequence[str] | None = None) -> int:
        """Move due scheduled jobs of ``kinds`` (None or empty: every kind) to pending.

        Workers of each promoted kind are woken on commit. DAG sleep tasks are
        left to the DAG scheduler, and tasks of a paused DAG stay scheduled
        until ``retry_dag`` releases them. Returns the number of jobs promoted.
        """
        row = await self._fetchrow("job_promote_due", source.value, _kinds(kinds), self.channel)
        assert row is not None
        return int(row["promoted"])

    async def reap_expired(
        self, source: Source, kinds: Sequence[str] | None = None, max_reaps: int = 5
    ) -> tuple[int, int]:
        """Reclaim active jobs whose lease expired (contract ``ReapExpired``).

        Each returns to pending with ``reap_count + 1`` and its attempt given
        back, or — once ``reap_count`` reaches ``max_reaps`` — goes dead with
        the attempt recorded. ``max_reaps <= 0`` never kills. Reaps are counted
        in the daily stats; workers of re-pended kinds are woken.

        Args:
            source: the partition to reap.
            kinds: kinds to reap; None or empty means every kind of the source.
            max_reaps: the reap budget per job.

        Returns:
            ``(reaped, killed)``: jobs reclaimed, and the subset dead-lettered.
        """
        row = await self._fetchrow(
            "job_reap_expired", source.value, _kinds(kinds), max_reaps, self.channel
        )
        assert row is not None
        return int(row["reaped"]), int(row["killed"])


class LimitMixin(PgBase):
    async def release_stopped_attempt(self, id: uuid.UUID, lease_token: uuid.UUID) -> int:
        """Contract ``JobSettler.release_stopped_attempt`` (one statement,
        ``azync_limit_release_stopped``, migration 0042)."""
        return int(await self._fetchval("limit_release_stopped", id, lease_token) or 0)

    async def declare_limits(self, source: Source, kind: str, limits: Sequence[LimitSpec]) -> None:
        """Contract ``LimitStore.declare_limits`` (one statement: definitions
        upserted, the kind's scopes replaced, its keyless live jobs keyed ``""``).

        Raises:
            ValueError: a bad kind or limit (nothing written).
        """
        check_name(kind, "limited kind")
        specs = check_limits(limits)
        await self._fetchrow(
            "limit_declare",
            source.value,
            kind,
            [s.name for s in specs],
            [s.type for s in specs],
            [s.capacity for s in specs],
            [s.period for s in specs],
            [s.per_key for s in specs],
        )

    async def declare_task_queue_limit(self, task_queue: str, limit: LimitSpec | None) -> None:
        """Contract ``LimitStore.declare_task_queue_limit`` (one statement:
        definition upserted, the task queue's scope replaced, its keyless live
        queue jobs and activities keyed ``""``).

        Raises:
            ValueError: a bad task queue or limit (nothing written).
        """
        task_queue = check_task_queue(task_queue, "limited task queue")
        spec = check_task_queue_limit(limit)
        await self._fetchrow(
            "limit_declare_task_queue",
            task_queue,
            spec.name if spec else None,
            spec.type if spec else None,
            spec.capacity if spec else None,
            spec.period if spec else None,
        )

    async def vacuum_limit_slots(self, idle_for: timedelta) -> int:
        """Contract ``LimitStore.vacuum_limit_slots`` (one statement)."""
        if idle_for < timedelta(0):
            raise ValueError(f"idle_for must not be negative, got {idle_for}")
        return int(await self._fetchval("limit_slots_vacuum", idle_for))

    async def list_limits(self) -> list[LimitUsage]:
        """Contract ``LimitStore.list_limits``."""
        rows = await self._fetch("limit_list")
        return [
            LimitUsage(
                spec=LimitSpec(
                    name=r["name"],
                    type=r["type"],
                    capacity=r["capacity"],
                    period=r["period"],
                    per_key=r["per_key"],
                ),
                kinds=list(r["kinds"]),
                task_queues=list(r["task_queues"]),
                in_flight=r["in_flight"],
                keys=r["keys"],
                waiting=r["waiting"],
                updated_at=r["updated_at"],
            )
            for r in rows
        ]


class WakeSubscription(ListenSubscription[Wake]):
    """The :class:`Wake` stream of ``Notifier.wake``.

    After a reconnect it replays one wake per ``(source, kind)`` with due
    pending jobs, covering notifications sent while it was not listening.
    """

    _task_name = "azync-wake-listener"

    def _decode(self, payload: str) -> Wake | None:
        return parse_wake(payload)

    async def _after_connect(self, conn: asyncpg.Connection, *, reconnected: bool) -> None:
        if not reconnected:
            return
        rows = await conn.fetch(QUERIES["job_pending_partitions"], self._store.now())
        for r in rows:
            with contextlib.suppress(ValueError):
                self._put(Wake(source=Source(r["source"]), kind=r["kind"]))


class NotifyMixin(PgBase):
    async def wake(self) -> WakeSubscription | None:
        """Contract ``Notifier.Wake``: a stream of wakes, or None when poll-only.

        LISTEN is live when this returns, so a job committed afterwards is
        announced. Close the subscription (or use it as an async context
        manager) to release its dedicated connection.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        return await open_subscription(self, WakeSubscription)


def _check_enqueue(p: EnqueueParams) -> None:
    """The checks of every enqueue verb (raises ValueError naming the field)."""
    if p.payload is None:
        raise ValueError("EnqueueParams.payload is required (JSON bytes, e.g. b'null')")
    if p.max_attempts_explicit:
        check_max_attempts(p.max_attempts, "EnqueueParams.max_attempts")
    check_name(p.kind, "EnqueueParams.kind")
    check_text(p.idempotency_key, "EnqueueParams.idempotency_key")
    check_meta(p.meta, "EnqueueParams.meta")
    check_task_queue(p.task_queue, "EnqueueParams.task_queue")
    check_priority(p.priority, "EnqueueParams.priority")
    if p.limit_key is not None:
        check_name(p.limit_key, "EnqueueParams.limit_key", empty_ok=True)


def _key(p: EnqueueParams) -> tuple[str, str]:
    return p.kind, p.idempotency_key


def _kinds(kinds: Sequence[str] | None) -> list[str] | None:
    return list(kinds) if kinds else None
