"""The Worker: lease loops, wake-ups, ack batching, maintenance and shutdown in one place."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from ..limits import ConcurrencyLimit, Limit, limit_specs
from ..retry import RetryPolicy
from ..store.queue import DEFAULT_TASK_QUEUE, LimitSpec, Source
from ..store.validate import (
    check_identity_name,
    check_max_attempts,
    check_task_queue,
    check_task_queue_limit,
)
from ._acker import AckBatcher
from ._loop import Dequeue, JobRunner, LeaseLoop
from ._maintenance import (
    BACKLOG_INTERVAL,
    DEFAULT_LEADERSHIP,
    STATS_LEADERSHIP,
    Maintenance,
    MaintenanceStep,
    Retention,
    backlog_step,
    builtin_steps,
    fold_stats_step,
    limit_slots_step,
)
from ._queue import Handler, Interceptor, QueueHandler, QueueRunner
from ._wake import WakeHub

if TYPE_CHECKING:
    from ..store.leadership import WorkerIdentity
    from ._store import WorkerStore

__all__ = ["Worker"]

log = logging.getLogger("azync_flow.worker")

H = TypeVar("H", bound=Handler)


class Worker:
    """Runs queue handlers (and other runtimes' loops) against a store.

    Example::

        worker = Worker(store, concurrency=20)

        @worker.register("email.send", max_attempts=5)
        async def send(payload: Email, ctx: JobContext) -> None:
            ...

        await worker.run()          # until SIGTERM/SIGINT or shutdown()

    Args:
        store: the store (see :class:`WorkerStore` for the verbs used).
        concurrency: default per-kind limit of jobs running at once.
        batch_size: most jobs leased per round trip (default: the kind's
            concurrency, at most 100).
        lease: default lease per attempt; renewed every ~lease/3 while the
            handler runs, so it bounds how long a crashed worker's job waits
            before it is reaped, not how long a handler may run.
        poll_interval: fallback polling period per kind when no push wake-up
            arrives (every poll is one ``dequeue_batch``).
        max_attempts: default attempt budget (first try included), stored on
            the job at its first lease.
        retry: default :class:`RetryPolicy` of queue handlers.
        shutdown_grace: how long in-flight jobs may finish after a shutdown
            request before they are cancelled and released.
        maintenance_interval: tick of the leader's maintenance (promote due,
            reap expired, fold the counter deltas into the daily stats: every
            worker takes part in that fold's election); non-leaders try to
            take over every tick.
        leader_ttl: how long a maintenance leadership holds without renewal
            (backend clock; default max(10 s, 3 ticks), at least 2 ticks). A
            leader that stops renewing (crashed, frozen) is replaced after
            it, and its late maintenance writes are refused.
        vacuum_interval: how often the leader runs the vacuum steps.
        retention: what the vacuum keeps.
        max_reaps: lease expiries a job survives before it is dead-lettered.
        task_queues: the task queues this worker serves (default ``("default",)``):
            it leases only jobs, DAG tasks, activity operations and workflow
            tasks routed to one of them (event deliveries have none).
        task_queue_limits: a concurrency limit per task queue, across every
            worker: at most ``max_in_flight`` queue jobs and activities routed
            to that queue in flight together, whatever their kind (workflow
            tasks and DAG tasks are not counted). Stored in PostgreSQL when
            the worker starts (the last start that declares a queue's limit
            wins; a worker that does not name a queue leaves its limit as
            stored); ``Client.set_task_queue_limit`` changes or removes one.
        maintain: sources whose built-in maintenance this worker takes part in
            (default: queue). Runtimes call :meth:`maintain_source` for theirs.
        handle_signals: install SIGTERM/SIGINT handlers in :meth:`run`.
        identity: the name this worker holds while it runs (default: the
            first free ``"<host>/<n>"``, ``n`` from 0). It survives a restart,
            and two live processes never hold it: a worker restarted under
            the same identity (the same host, or a fixed name such as a
            StatefulSet pod's) expires at start the leases its killed
            predecessor held, so they are retried at the next maintenance
            tick instead of after ``lease``. Workers sharing one store share
            its identity.
        metrics_interval: how often the leader of the stats election reads
            the backlog (pending jobs and their oldest age per kind, uncertain
            operations) for the metric gauges; one query, made only when a
            meter provider is installed (docs/metrics.md).

    Raises:
        ValueError: ``leader_ttl`` is shorter than two maintenance ticks; an
            empty ``task_queues`` or a task queue name the store refuses; a
            per-key task queue limit.
        TypeError: a task queue limit that is not a ConcurrencyLimit.
    """

    def __init__(
        self,
        store: WorkerStore,
        *,
        concurrency: int = 10,
        batch_size: int | None = None,
        lease: timedelta = timedelta(seconds=30),
        poll_interval: timedelta = timedelta(seconds=1),
        max_attempts: int = 25,
        retry: RetryPolicy | None = None,
        shutdown_grace: timedelta = timedelta(seconds=30),
        maintenance_interval: timedelta = timedelta(seconds=1),
        leader_ttl: timedelta | None = None,
        vacuum_interval: timedelta = timedelta(minutes=10),
        retention: Retention | None = None,
        max_reaps: int = 5,
        task_queues: Sequence[str] = (DEFAULT_TASK_QUEUE,),
        maintain: tuple[Source, ...] = (Source.QUEUE,),
        handle_signals: bool = True,
        metrics_interval: timedelta = BACKLOG_INTERVAL,
        task_queue_limits: Mapping[str, ConcurrencyLimit] | None = None,
        identity: str | None = None,
    ) -> None:
        check_max_attempts(max_attempts)
        if isinstance(task_queues, str) or not task_queues:
            raise ValueError("task_queues must be a non-empty sequence of task queue names")
        #: The task queues this worker serves, in the order given (duplicates dropped).
        self.task_queues: tuple[str, ...] = tuple(
            dict.fromkeys(check_task_queue(q, "task_queues item") for q in task_queues)
        )
        self.store = store
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.lease = lease
        self.poll_interval = poll_interval
        self.max_attempts = max_attempts
        self.retry = retry or RetryPolicy()
        self.shutdown_grace = shutdown_grace
        self.vacuum_interval = vacuum_interval
        self.retention = retention or Retention()
        self.max_reaps = max_reaps
        self.handle_signals = handle_signals
        self.identity_name = None if identity is None else check_identity_name(identity)
        #: The identity held while running (None before :meth:`run` claims it).
        self.identity: WorkerIdentity | None = None
        self.handlers: dict[str, QueueHandler] = {}
        self.loops: dict[tuple[Source, str], LeaseLoop] = {}
        self.acks = AckBatcher(store)
        self.wakeups = WakeHub(store)
        self.maintenance = Maintenance(store, tick=maintenance_interval, leader_ttl=leader_ttl)
        self.maintenance.on_runnable = self._poke_source
        self._queue_runner = QueueRunner(store, self.handlers, self.acks)
        self._maintained: set[Source] = set()
        self._changed = asyncio.Event()
        self._stopping: asyncio.Event | None = None
        self._started = asyncio.Event()
        self._running = False
        #: Why the running worker is stopping (a signal's name, ...), None while it runs.
        self._stop_reason: str | None = None
        #: What the last shutdown did: (in flight, finished, released, seconds); None before.
        self._shutdown_report: tuple[int, int, int, float] | None = None
        self._bg: asyncio.Task[None] | None = None
        self._periodic: list[_Periodic] = []
        self._stop_hooks: dict[str, Callable[[], Awaitable[Any]]] = {}
        #: The limits this worker stores when it starts, by (source, kind).
        self.limits: dict[tuple[Source, str], list[LimitSpec]] = {}
        #: The task queue limits this worker stores when it starts, by task queue.
        self.task_queue_limits: dict[str, LimitSpec] = {}
        for queue, lim in (task_queue_limits or {}).items():
            if not isinstance(lim, ConcurrencyLimit):
                raise TypeError(f"task_queue_limits[{queue!r}] must be a ConcurrencyLimit")
            spec = check_task_queue_limit(lim.spec())
            assert spec is not None
            if any(o.name == spec.name and o != spec for o in self.task_queue_limits.values()):
                raise ValueError(f"task_queue_limits: limit {spec.name!r} with two settings")
            self.task_queue_limits[check_task_queue(queue, "task_queue_limits key")] = spec
        for source in maintain:
            self.maintain_source(source)
        self.add_maintenance(fold_stats_step(store), name="stats.fold", leadership=STATS_LEADERSHIP)
        self.add_maintenance(
            limit_slots_step(store, self.retention), name="limits.vacuum", interval=vacuum_interval
        )
        self.add_maintenance(
            backlog_step(store, metrics_interval),
            name="metrics.backlog",
            interval=metrics_interval,
            leadership=STATS_LEADERSHIP,
        )

    # --- registration --------------------------------------------------------------

    @overload
    def register(
        self,
        kind: str,
        handler: None = None,
        *,
        concurrency: int | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        lease: timedelta | None = None,
        payload_type: Any = None,
        limits: Sequence[Limit] = (),
    ) -> Callable[[H], H]: ...

    @overload
    def register(
        self,
        kind: str,
        handler: H,
        *,
        concurrency: int | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        lease: timedelta | None = None,
        payload_type: Any = None,
        limits: Sequence[Limit] = (),
    ) -> H: ...

    def register(
        self,
        kind: str,
        handler: H | None = None,
        *,
        concurrency: int | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        lease: timedelta | None = None,
        payload_type: Any = None,
        limits: Sequence[Limit] = (),
    ) -> H | Callable[[H], H]:
        """Register an async queue handler for ``kind`` (directly or as a decorator).

        The handler takes ``(payload)`` or ``(payload, ctx: JobContext)``.
        The payload is the job's JSON decoded as ``payload_type`` — by default
        the annotation of the handler's first parameter (a msgspec Struct, a
        dataclass, ``dict[str, int]`` ...), else plain JSON values. Returning
        acks the job; raising retries it per ``retry`` or dead-letters it.

        Args:
            kind: job kind (the enqueue ``kind``).
            handler: the coroutine function; omit to use as a decorator.
            concurrency: this kind's limit of jobs running at once in this worker.
            max_attempts: attempt budget (first try included); stored durably
                on each job's first lease, so changing it affects new jobs only.
                Default: ``retry.maximum_attempts`` or the worker's ``max_attempts``.
            retry: backoff and non-retryable errors (default: the worker's).
            lease: lease per attempt (default: the worker's).
            payload_type: explicit payload type (overrides the annotation).
            limits: concurrency and rate limits of the kind across every
                worker (:meth:`declare_limits`); a job's key for the per-key
                ones is its enqueue's ``limit_key``.

        Raises:
            TypeError: the handler is not an async function of 1 or 2
                arguments; a limit is not a ConcurrencyLimit / RateLimit.
            ValueError: ``kind`` is already registered, or the worker is
                running; two limits share a name.
        """

        if max_attempts is not None:
            check_max_attempts(max_attempts)
        specs = limit_specs(limits)

        def add(fn: H) -> H:
            self._keep_limits(Source.QUEUE, kind, specs)  # first: a clash registers nothing
            policy = retry or self.retry
            spec = QueueHandler.build(
                kind,
                fn,
                concurrency=concurrency or self.concurrency,
                max_attempts=max_attempts or policy.maximum_attempts or self.max_attempts,
                retry=policy,
                lease=lease or self.lease,
                payload_type=payload_type,
            )
            self.add_loop(
                Source.QUEUE,
                kind,
                self._queue_runner,
                concurrency=spec.concurrency,
                lease=spec.lease,
                default_max_attempts=spec.max_attempts,
            )
            self.handlers[kind] = spec
            return fn

        return add if handler is None else add(handler)

    def declare_limits(self, source: Source, kind: str, limits: Sequence[Limit]) -> None:
        """Store ``limits`` as the limits of ``(source, kind)`` when the worker starts.

        The definitions live in PostgreSQL so every worker enforces the same
        ones: each worker stores those of the kinds it runs when it starts
        (the last start wins, limits the kind no longer lists stop applying).
        The workflow runtime declares each activity's limits here.

        Raises:
            TypeError / ValueError: bad limits (see :class:`~azync_flow.ConcurrencyLimit`).
            ValueError: the worker is running.
        """
        if self._running:
            raise ValueError("declare limits before the worker starts")
        self._keep_limits(source, kind, limit_specs(limits))

    def _keep_limits(self, source: Source, kind: str, specs: list[LimitSpec]) -> None:
        """Keep ``specs`` for ``(source, kind)``; a name this worker already
        declares for another kind must mean the same limit (the stored
        definition is one per name: one of the two would silently win)."""
        for spec in specs:
            for (other_source, other_kind), others in self.limits.items():
                clash = next((o for o in others if o.name == spec.name and o != spec), None)
                if clash is not None and (other_source, other_kind) != (source, kind):
                    raise ValueError(
                        f"limit {spec.name!r} is declared with different settings by "
                        f"{other_kind!r} and {kind!r}: a name is one limit"
                    )
            for queue, other in self.task_queue_limits.items():
                if other.name == spec.name and other != spec:
                    raise ValueError(
                        f"limit {spec.name!r} is declared with different settings by "
                        f"task queue {queue!r} and {kind!r}: a name is one limit"
                    )
        if specs:
            self.limits[(source, kind)] = specs

    def add_interceptor(self, interceptor: Interceptor) -> None:
        """Wrap every queue handler call in ``interceptor`` (outermost first added).

        ``async def interceptor(ctx: JobContext, call_next) -> None`` must
        ``await call_next()`` and let its exceptions propagate; the hook for
        per-attempt telemetry, timing and logging of queue jobs. Loops added
        with :meth:`add_loop` wrap their own runners instead.
        """
        self._queue_runner.interceptors.append(interceptor)

    def add_loop(
        self,
        source: Source,
        kind: str,
        runner: JobRunner,
        *,
        concurrency: int | None = None,
        batch_size: int | None = None,
        lease: timedelta | None = None,
        poll_interval: timedelta | None = None,
        default_max_attempts: int | None = None,
        override_default: bool = True,
        dequeue: Dequeue | None = None,
    ) -> LeaseLoop:
        """Lease jobs of ``(source, kind)`` and run each through ``runner``.

        The extension point of the workflow, activity, DAG and event
        runtimes: the worker leases in batches within ``concurrency``, wakes
        the loop on NOTIFY (polling as fallback), renews each lease every
        ~lease/3 while ``runner`` works (cancelling it if the lease is lost;
        a runner that called ``lease.renew_only_by_heartbeats(silence)`` is
        renewed only by its own ``lease.extend()`` calls and cancelled once
        silent for longer),
        and on shutdown stops leasing, waits ``shutdown_grace`` and releases
        what is still running. ``runner(job, lease)`` must settle the job
        itself with ``lease.token`` (ack, reschedule, dead, snooze, release or
        a transaction of its own); it may use :attr:`acks` to batch plain acks.
        ``dequeue(limit, lease)``, when given, replaces the generic
        ``dequeue_batch`` lease query (the workflow runtime leases with
        ``lease_workflow_tasks`` so passes of one execution never overlap).

        Returns:
            The loop (its ``stats`` and ``in_flight`` are useful in tests).

        Raises:
            ValueError: a loop for ``(source, kind)`` exists, or the worker runs.
        """
        if self._running:
            raise ValueError("add loops before the worker starts")
        if (source, kind) in self.loops:
            raise ValueError(f"a loop for {source}:{kind} is already registered")
        conc = concurrency or self.concurrency
        loop = LeaseLoop(
            self.store,
            source,
            kind,
            runner,
            concurrency=conc,
            batch_size=batch_size or self.batch_size or min(conc, 100),
            lease=lease or self.lease,
            poll_interval=poll_interval or self.poll_interval,
            default_max_attempts=default_max_attempts or self.max_attempts,
            override_default=override_default,
            dequeue=dequeue,
            task_queues=self.task_queues,
        )
        self.loops[(source, kind)] = loop
        self.wakeups.route(source, kind, loop.poke)
        return loop

    def add_maintenance(
        self,
        step: MaintenanceStep,
        *,
        name: str,
        interval: timedelta | None = None,
        leadership: str = DEFAULT_LEADERSHIP,
        source: Source | None = None,
    ) -> None:
        """Run ``step`` periodically on the leader of ``leadership``.

        Args:
            step: ``async def step() -> int | None``; a positive result means
                work became runnable and pokes this worker's loops of
                ``source`` (all loops when ``source`` is None).
            name: unique step name (for logs).
            interval: period (default: the maintenance tick).
            leadership: election name; steps of one name run on one worker.
            source: the job source the step makes runnable, if any.

        Raises:
            ValueError: a step with this name exists.
        """
        self.maintenance.add(
            step,
            name=name,
            interval=interval or timedelta(seconds=self.maintenance.tick_seconds),
            leadership=leadership,
            source=source,
        )

    def add_periodic(
        self,
        step: Callable[[], Awaitable[Any]],
        *,
        name: str,
        interval: timedelta,
        on_stop: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """Run ``step`` on THIS worker (no election): once before the worker
        counts as started, then every ``interval`` while it runs; ``on_stop``
        once at shutdown. For what each worker keeps about itself (e.g. its
        registry row). A failing step is logged and tried again next time.

        Args:
            step: ``async def step()``.
            name: for logs.
            interval: period between calls.
            on_stop: ``async def on_stop()``, called after the loops stopped.
        """
        self._periodic.append(_Periodic(name, step, interval.total_seconds(), on_stop))

    def add_stop_hook(self, name: str, hook: Callable[[], Awaitable[Any]]) -> bool:
        """Call ``hook`` once when the worker stops, after its in-flight jobs
        ended (or were cancelled past ``shutdown_grace``), its acks were flushed
        and its periodic steps stopped; hooks run in the order added.

        For what must leave the process before it exits (buffered telemetry,
        say). A failing hook is logged and the next one still runs. Nothing
        runs them when the process is killed (SIGKILL).

        Args:
            name: identifies the hook; a second hook under a name already
                added is ignored, so a component attached twice adds it once.
            hook: ``async def hook()``; a blocking hook should hand its work
                to a thread (``asyncio.to_thread``).

        Returns:
            True when the hook was added, False when ``name`` was taken.
        """
        if name in self._stop_hooks:
            return False
        self._stop_hooks[name] = hook
        return True

    @property
    def maintained_sources(self) -> frozenset[Source]:
        """The sources whose built-in promote/reap/vacuum this worker takes part in."""
        return frozenset(self._maintained)

    def maintain_source(self, source: Source) -> None:
        """Take part in the built-in promote/reap/vacuum of ``source`` (leader only).

        Each source has its own election (``azync_flow.maintenance.<source>``),
        and steps cover every kind of the source, not just this worker's.
        """
        if source in self._maintained:
            return
        self._maintained.add(source)
        tick = timedelta(seconds=self.maintenance.tick_seconds)
        for name, fn, is_vacuum in builtin_steps(
            self.store, source, max_reaps=self.max_reaps, retention=self.retention
        ):
            self.add_maintenance(
                fn,
                name=name,
                interval=self.vacuum_interval if is_vacuum else tick,
                leadership=f"{DEFAULT_LEADERSHIP}.{source}",
                source=source,
            )

    def _poke_source(self, source: Source | None) -> None:
        for (src, _kind), loop in self.loops.items():
            if source is None or src == source:
                loop.poke()

    # --- running -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    async def started(self) -> None:
        """Wait until the loops run and push wake-ups are subscribed."""
        await self._started.wait()

    async def run(self) -> None:
        """Run until :meth:`shutdown` is requested (or SIGTERM/SIGINT), then shut down.

        Shutdown stops leasing, waits up to ``shutdown_grace`` for in-flight
        jobs, cancels and releases the rest, flushes pending acks and gives up
        leadership. Its last log line, at INFO, says why it stopped and what
        became of the jobs in flight: ``worker stopped (SIGTERM): drained 1 of
        1 in-flight job(s) within the 30s grace; shutdown took 0.4s``.

        Raises:
            SchemaNotMigratedError: at once, before leasing anything, when the
                store's schema lacks tables or migrations (run ``azync-flow migrate``).
            StoreUnavailableError: the database cannot be reached at start.
        """
        if self._running:
            raise RuntimeError("the worker is already running")
        self._running = True
        self._stopping = asyncio.Event()
        self._stop_reason = None
        self._shutdown_report = None
        self._started.clear()
        removers = self._install_signals() if self.handle_signals else []
        try:
            await self._run(self._stopping, self._started)
        finally:
            for remove in removers:
                remove()
            self._started.clear()
            self._running = False

    async def _run(self, stopping: asyncio.Event, started: asyncio.Event) -> None:
        await self.store.check_schema()  # fail at once, not with every statement retried
        self.identity = await self.store.claim_worker_identity(self.identity_name)
        try:
            await self._run_as(self.identity, stopping, started)
        finally:
            await self.identity.release()
            self.identity = None
            self._log_stopped()

    def _log_stopped(self) -> None:
        """The last line of a run that got as far as shutting down: why it
        stopped and what became of the jobs in flight."""
        if self._shutdown_report is None:
            return
        in_flight, finished, released, seconds = self._shutdown_report
        grace = self.shutdown_grace.total_seconds()
        if in_flight:
            jobs = f"drained {finished} of {in_flight} in-flight job(s) within the {grace:g}s grace"
            jobs += f", released {released} to other workers" if released else ""
            if lost := in_flight - finished - released:
                jobs += f", {lost} not released (their leases expire)"
        else:
            jobs = "no jobs were in flight"
        log.info(
            "worker stopped (%s): %s; shutdown took %.1fs",
            self._stop_reason or "shutdown requested",
            jobs,
            seconds,
        )

    async def _run_as(
        self, identity: WorkerIdentity, stopping: asyncio.Event, started: asyncio.Event
    ) -> None:
        self.maintenance.holder = identity.holder
        for (source, kind), specs in self.limits.items():
            await self.store.declare_limits(source, kind, specs)
        for queue, spec in self.task_queue_limits.items():
            await self.store.declare_task_queue_limit(queue, spec)
        log.info("worker serving %s as %s", self.store.target(), identity.name)
        self._log_registered()
        for lp in self.loops.values():
            lp.reset()
        await self.wakeups.start()
        loop_tasks = [
            asyncio.create_task(lp.run(self._changed), name=repr(lp)) for lp in self.loops.values()
        ]
        for task in loop_tasks:
            task.add_done_callback(self._loop_ended)
        maint = asyncio.create_task(self.maintenance.run(stopping), name="azync maintenance")
        for p in self._periodic:
            await p.call()
        periodic = [
            asyncio.create_task(p.run(stopping), name=f"azync {p.name}") for p in self._periodic
        ]
        periodic.append(
            asyncio.create_task(self._keep_identity(identity, stopping), name="azync identity")
        )
        started.set()
        try:
            await stopping.wait()
        finally:
            await self._shutdown(loop_tasks, maint)
            for task in periodic:
                task.cancel()
            await asyncio.gather(*periodic, return_exceptions=True)
            for p in self._periodic:
                await p.stop()
            await self._run_stop_hooks()

    async def _run_stop_hooks(self) -> None:
        for name, hook in list(self._stop_hooks.items()):
            try:
                await hook()
            except Exception as exc:  # one failing hook must not keep the others from running
                log.warning("stop hook %s failed: %s", name, exc)

    async def _shutdown(
        self, loop_tasks: list[asyncio.Task[None]], maint: asyncio.Task[Any]
    ) -> None:
        grace = self.shutdown_grace.total_seconds()
        began = time.monotonic()
        for lp in self.loops.values():
            lp.stop()
        # Loops exit after their current lease round, so nothing is leased after this.
        await asyncio.gather(*loop_tasks, return_exceptions=True)
        in_flight = sum(len(lp.in_flight) for lp in self.loops.values())
        drained = await asyncio.gather(*(lp.drain(grace) for lp in self.loops.values()))
        finished = sum(f for f, _ in drained)
        released = sum(r for _, r in drained)
        self._shutdown_report = (in_flight, finished, released, 0.0)
        await self.acks.close()
        if self._stopping is not None:
            self._stopping.set()
        await asyncio.gather(maint, return_exceptions=True)
        await self.wakeups.close()
        self._shutdown_report = (in_flight, finished, released, time.monotonic() - began)

    async def _keep_identity(self, identity: WorkerIdentity, stopping: asyncio.Event) -> None:
        """Every tick: claim the identity again if its session was lost; stop
        the worker when another process holds it now (it has taken back this
        worker's leases; its settles would be refused)."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.maintenance.tick_seconds):
                    await stopping.wait()
            if not stopping.is_set() and not await identity.check():
                log.error("worker identity %r lost to another process; stopping", identity.name)
                self._stop_reason = self._stop_reason or "identity lost to another process"
                self.shutdown()
                return

    def _log_registered(self) -> None:
        """One INFO line per source naming what this worker runs (its loops' kinds)."""
        log.info("worker serves task queues: %s", ", ".join(self.task_queues))
        kinds: dict[Source, list[str]] = {}
        for source, kind in self.loops:
            kinds.setdefault(source, []).append(kind)
        if not kinds:
            log.warning("worker starting with nothing registered: it will lease nothing")
        for source, names in kinds.items():
            log.info("worker runs %s %s: %s", source, _WHAT[source], ", ".join(sorted(names)))

    def _loop_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        log.error(
            "%s crashed; shutting the worker down", task.get_name(), exc_info=task.exception()
        )
        self._stop_reason = self._stop_reason or f"{task.get_name()} crashed"
        self.shutdown()

    def shutdown(self) -> None:
        """Request a graceful shutdown (what SIGTERM/SIGINT do); returns at once.

        Leasing stops immediately; :meth:`run` then drains in-flight jobs.
        """
        if self._stopping is not None and self._running:
            for lp in self.loops.values():
                lp.stop()
            self._stopping.set()

    def _install_signals(self) -> list[Callable[[], None]]:
        if threading.current_thread() is not threading.main_thread():
            return []
        loop = asyncio.get_running_loop()
        removers: list[Callable[[], None]] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):
                continue
            removers.append(functools.partial(_remove_signal, loop, sig))
        return removers

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s received: stopping leasing, finishing in-flight jobs", sig.name)
        self._stop_reason = self._stop_reason or sig.name
        self.shutdown()

    async def run_until_idle(self) -> None:
        """Run until no work is runnable, then shut down (the test driver).

        Idle means: every loop's last lease attempt found nothing, nothing is
        in flight, every ack is written, and a forced maintenance pass
        (promote due, reap expired, any added steps this worker leads) made
        nothing runnable. Jobs scheduled in the future do not count; move a
        :class:`~azync_flow.testing.MovableClock` past them and call again.
        Wrap it in ``asyncio.timeout`` to bound it.
        """
        if self._running:
            raise RuntimeError("the worker is already running")
        runner = asyncio.create_task(self.run())
        try:
            await self._started_or_failed(runner)
            await self._until_idle()
        finally:
            self.shutdown()
            await runner

    async def wait_idle(self) -> None:
        """While :meth:`run` runs: return once no work is runnable (the idle test
        of :meth:`run_until_idle`, without shutting down).

        Used by the testing kit to step a running worker between clock moves.
        Jobs scheduled in the future do not count.

        Raises:
            RuntimeError: the worker is not running.
        """
        if not self._running:
            raise RuntimeError("wait_idle needs a running worker (run() or async with)")
        await self.started()
        await self._until_idle()

    async def _started_or_failed(self, runner: asyncio.Task[None]) -> None:
        """Wait for :meth:`started`; re-raise at once when ``runner`` ends first."""
        started = asyncio.ensure_future(self._started.wait())
        try:
            await asyncio.wait((started, runner), return_when=asyncio.FIRST_COMPLETED)
        finally:
            started.cancel()
        if runner.done() and not self._started.is_set():
            runner.result()

    async def _until_idle(self) -> None:
        while True:
            await self._all_loops_idle()
            # Jobs leased from here on (a wake-up's lease may still be in flight)
            # mean another round is needed.
            leased = sum(lp.stats.leased for lp in self.loops.values())
            await self.acks.flush()
            made_runnable = await self.maintenance.tick(force=True)
            # One more lease round on every loop: work committed before it is seen.
            marks = {lp: lp.stats.dequeues for lp in self.loops.values()}
            for lp in self.loops.values():
                lp.poke()
            await self._all_loops_idle(after=marks)
            # A job run in that round may have made work for a loop that had
            # already looked (a workflow pass scheduling an activity): go again.
            ran = sum(lp.stats.leased for lp in self.loops.values()) - leased
            if made_runnable == 0 and ran == 0 and all(lp.idle for lp in self.loops.values()):
                await self.acks.flush()
                return

    async def _all_loops_idle(self, after: dict[LeaseLoop, int] | None = None) -> None:
        def done() -> bool:
            for lp in self.loops.values():
                if lp.in_flight or not lp.idle:
                    return False
                if after is not None and lp.stats.dequeues <= after[lp]:
                    return False
            return True

        while not done():
            self._changed.clear()
            if done():
                return
            # Loops signal idle transitions; a short timeout re-checks counters.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._changed.wait()
            for lp in self.loops.values():
                if not lp.in_flight and not lp.idle:
                    lp.poke()

    # --- context manager ---------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Start :meth:`run` in the background; ``__aexit__`` shuts down gracefully."""
        if self._running:
            raise RuntimeError("the worker is already running")
        self._bg = asyncio.create_task(self.run())
        await self._started_or_failed(self._bg)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
        if self._bg is not None:
            await self._bg
            self._bg = None


class _Periodic:
    """One :meth:`Worker.add_periodic` step."""

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[Any]],
        interval: float,
        on_stop: Callable[[], Awaitable[Any]] | None,
    ) -> None:
        self.name = name
        self.step = step
        self.interval = interval
        self.on_stop = on_stop

    async def call(self) -> None:
        try:
            await self.step()
        except Exception as exc:  # e.g. the database is down: the next call retries
            log.info("%s failed, retrying in %.0fs: %s", self.name, self.interval, exc)

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.interval)
                return
            await self.call()

    async def stop(self) -> None:
        if self.on_stop is None:
            return
        try:
            await self.on_stop()
        except Exception as exc:
            log.info("%s: stopping failed: %s", self.name, exc)


#: How the log names the kinds of each source.
_WHAT = {
    Source.QUEUE: "job kinds",
    Source.EVENT: "subscribers",
    Source.DAG: "task kinds",
    Source.WORKFLOW: "kinds (workflow tasks, activity operations)",
}


def _remove_signal(loop: asyncio.AbstractEventLoop, sig: signal.Signals) -> None:
    loop.remove_signal_handler(sig)
