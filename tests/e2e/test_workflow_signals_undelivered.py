"""Every acknowledged signal is either processed by the workflow or recorded as
undelivered on the finished execution — on a real Worker, with the completing
commit held open while signals arrive, and under a stream of signals with a
stop in the middle. Each test runs with the sticky cache on and off."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

import pytest

from azync_flow import workflow
from azync_flow.client import Client, WorkflowHandle
from azync_flow.errors import NotFoundError
from azync_flow.replay import Replayer, SignalReceived, SignalsUndelivered
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@workflow(name="signal_counter")
async def signal_counter(ctx: WorkflowContext, _: None) -> int:
    n = 0
    while True:
        v = await ctx.wait_signal("ev")
        n += 1
        if v["stop"]:
            return n


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry([signal_counter], []), cache_size=request.param)


class CompletionGate:
    """Holds the completing pass commit of the real store until released: the
    window between the pass that decided to complete and its commit."""

    def __init__(self, store: PostgresStore) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self._commit = store.commit_pass
        store.commit_pass = self._gated  # type: ignore[method-assign]

    async def _gated(self, *args: Any, **kwargs: Any) -> Any:
        outcome = args[3].outcome  # commit_pass(job_id, token, run_id, write)
        if outcome is not None and outcome[0] in ("complete", "fail", "cancelled"):
            self.entered.set()
            await self.release.wait()
        return await self._commit(*args, **kwargs)


async def _accounted(handle: WorkflowHandle[Any]) -> tuple[list[str], list[str]]:
    """Message ids the code received, and those recorded undelivered."""
    events = [e.event for e in await handle.history()]
    received = [e.message_id for e in events if isinstance(e, SignalReceived)]
    undelivered = [
        s.message_id for e in events if isinstance(e, SignalsUndelivered) for s in e.signals
    ]
    assert isinstance(events[-1], SignalsUndelivered) or not undelivered
    return received, undelivered


async def test_signal_accepted_inside_the_completion_window_is_reported_undelivered(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    gate = CompletionGate(store)
    handle = await Client(store).start(signal_counter, None)
    assert await handle.signal("ev", {"stop": False}, message_id="m0")
    assert await handle.signal("ev", {"stop": True}, message_id="m1")
    stop = asyncio.Event()
    worker = asyncio.create_task(runtime.run(stop))
    try:
        await asyncio.wait_for(gate.entered.wait(), 10)
        # the pass decided to complete; its commit has not run yet
        assert await handle.signal("ev", {"stop": False}, message_id="m2")
        gate.release.set()
        assert await handle.result(timeout=10) == 2
    finally:
        stop.set()
        await worker
    view = await handle.describe()
    assert (view.state, view.signals_undelivered) == (WorkflowState.SUCCEEDED, 1)
    received, undelivered = await _accounted(handle)
    assert (received, undelivered) == (["m0", "m1"], ["m2"])
    with pytest.raises(NotFoundError, match="finished"):
        await handle.signal("ev", {"stop": False}, message_id="m3")
    verdict = Replayer([signal_counter]).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error


async def test_a_stream_of_signals_with_a_stop_in_the_middle_loses_none(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    total, stop_at = 600, 300
    handle = await Client(store).start(signal_counter, None)
    accepted: list[str] = []
    refused: list[str] = []  # messages of the "finished" errors
    numbers = itertools.count()

    async def sender() -> None:
        while (i := next(numbers)) < total:
            mid = f"m{i}"
            try:
                if await handle.signal("ev", {"stop": i == stop_at}, message_id=mid):
                    accepted.append(mid)
            except NotFoundError as err:
                refused.append(str(err))

    stop = asyncio.Event()
    worker = asyncio.create_task(runtime.run(stop))
    try:
        await asyncio.gather(*(sender() for _ in range(4)))
        n = await handle.result(timeout=60)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    assert len(accepted) + len(refused) == total
    assert all("finished" in message for message in refused)
    assert "m300" in accepted
    received, undelivered = await _accounted(handle)
    view = await handle.describe()
    assert n == len(received)  # the count returned = SignalReceived events
    assert view.signals_undelivered == len(undelivered)
    assert n + view.signals_undelivered == len(accepted)
    assert sorted(received + undelivered) == sorted(accepted)
    assert received[-1] == "m300"
    verdict = Replayer([signal_counter]).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error
