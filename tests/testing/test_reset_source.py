"""``WorkflowEnvironment.reset_source``: a running environment's source starts
over (jobs, counters, idempotency keys) while the event ledger and the other
sources stay."""

from __future__ import annotations

from datetime import timedelta

import pytest

from azync_flow import EventContext, subscriber
from azync_flow.store.queue import Source
from azync_flow.testing import WorkflowEnvironment
from tests.store.helpers import stat_sums

RECEIVED: list[str] = []


@subscriber("reset.note", name="reset_note_reader")
async def note_reader(payload: dict[str, str], ctx: EventContext) -> None:
    RECEIVED.append(payload["n"])


async def test_a_reset_queue_takes_a_used_idempotency_key_again_and_counts_from_zero(
    workflow_env: WorkflowEnvironment,
) -> None:
    sent: list[str] = []

    @workflow_env.worker.register("reset.mail")
    async def mail(payload: dict[str, str]) -> None:
        sent.append(payload["to"])

    env = await workflow_env.start()
    keyed = {"idempotency_key": "ann-welcome", "idempotency_ttl": timedelta(days=1)}
    assert await env.client.enqueue("reset.mail", {"to": "ann"}, **keyed) is not None
    await env.run_until_settled()
    assert await env.client.enqueue("reset.mail", {"to": "ann"}, **keyed) is None  # deduped
    assert (await stat_sums(env.store, "reset.mail"))["processed"] == 1

    report = await env.reset_source(Source.QUEUE)

    assert (report.jobs, report.keys) == (1, 1)
    assert report.stats >= 1
    assert (await stat_sums(env.store, "reset.mail"))["processed"] == 0
    assert await env.client.enqueue("reset.mail", {"to": "ann"}, **keyed) is not None
    await env.run_until_settled()
    assert sent == ["ann", "ann"]  # the worker runs the new job as before the reset


async def test_a_reset_of_the_event_source_keeps_the_ledger_and_the_subscriber(
    workflow_env: WorkflowEnvironment,
) -> None:
    RECEIVED.clear()
    env = await workflow_env.start(subscribers=[note_reader])
    first = await env.client.publish("reset.note", {"n": "1"})
    await env.run_until_settled()

    report = await env.reset_source("event")

    assert report.jobs == 1  # the delivery, settled
    assert (await env.store.get_event(first)).deliveries == 0  # the event stays
    await env.client.publish("reset.note", {"n": "2"})  # the registration stays
    await env.run_until_settled()
    assert RECEIVED == ["1", "2"]


async def test_a_reset_of_an_unknown_source_is_refused(workflow_env: WorkflowEnvironment) -> None:
    env = await workflow_env.start()
    await env.client.enqueue("reset.kept", {})
    with pytest.raises(ValueError, match="unknown source 'jobs'"):
        await env.reset_source("jobs")
    assert (await stat_sums(env.store, "reset.kept"))["enqueued"] == 1
