"""Queries and updates in the replay engine (no database), in both cache modes."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.errors import QueryNotFoundError, ReadOnlyContextError
from azync_flow.replay import PassStatus, RecordedHistory, Replayer, WorkflowInstance
from azync_flow.replay.events import UpdateAccepted, UpdateCompleted
from azync_flow.workflow import WorkflowContext
from tests.unit.test_replay_sim import MODES, Sim


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@activity(name="reserve")
def reserve(item: str) -> str:
    return f"reserved:{item}"


FAKES = {"reserve": reserve}


def _positive(n: int) -> None:
    if n <= 0:
        raise ValueError("quantity must be positive")


@workflow(name="cart")
async def cart(ctx: WorkflowContext, owner: str) -> list[str]:
    items: list[str] = []

    @ctx.query()
    def count() -> int:
        return len(items)

    @ctx.query("owner_items")
    def owner_items(prefix: str) -> list[str]:
        return [f"{prefix}{owner}:{i}" for i in items]

    @ctx.query()
    def sneaky() -> str:
        return str(ctx.now())

    @ctx.update("add", validator=lambda item, n: _positive(n))
    async def add(item: str, n: int) -> int:
        for _ in range(n):
            items.append(await reserve(item))
        return len(items)

    @ctx.update()
    def fail(reason: str) -> None:
        raise RuntimeError(reason)

    await ctx.wait_signal("checkout")
    return items


def update(sim: Sim, name: str, update_id: str, *args: Any) -> None:
    sim.signal(f"$update:{name}", list(args), update_id)


def instance_after(sim: Sim) -> WorkflowInstance:
    """A fresh instance replayed over the sim's history (what a query worker builds)."""
    instance = WorkflowInstance(sim.defn, sim.input, sim.info)
    instance.advance(sim.history)
    return instance


def test_an_update_is_accepted_recorded_and_its_result_reported(mode: str) -> None:
    sim = Sim(cart, "ann", mode=mode, activities=FAKES)
    sim.run_pass()
    update(sim, "add", "u1", "book", 2)
    out = sim.run_pass()
    assert [r.state for r in out.update_results] == []  # accepted, handler waits on activity
    assert sim.types()[-2:] == ["UpdateAccepted", "ActivityScheduled"]
    out = sim.run()
    assert [(r.update_id, r.state, r.result) for r in sim.outcomes[-1].update_results] == [
        ("u1", "completed", b"2")
    ]
    assert out.status is PassStatus.BLOCKED
    sim.signal("checkout")
    sim.run()
    assert sim.result() == ["reserved:book", "reserved:book"]
    accepted = [e.event for e in sim.history if isinstance(e.event, UpdateAccepted)]
    completed = [e.event for e in sim.history if isinstance(e.event, UpdateCompleted)]
    assert [(a.update_id, a.name) for a in accepted] == [("u1", "add")]
    assert [(c.update_id, bytes(c.result)) for c in completed] == [("u1", b"2")]
    result = Replayer([cart]).replay(RecordedHistory.from_rows(cart.name, sim.input, sim.history))
    assert result.ok, result.error


def test_a_validator_rejection_writes_no_history_and_consumes_the_request(mode: str) -> None:
    sim = Sim(cart, "ann", mode=mode, activities=FAKES)
    sim.run_pass()
    before = len(sim.history)
    update(sim, "add", "u1", "book", 0)
    out = sim.run_pass()
    assert len(sim.history) == before
    assert [(r.state, r.error_type, r.message) for r in out.update_results] == [
        ("rejected", "ValueError", "quantity must be positive")
    ]
    assert sim.inbox == []


def test_an_unknown_update_and_a_reused_id_are_rejected(mode: str) -> None:
    sim = Sim(cart, "ann", mode=mode, activities=FAKES)
    sim.run_pass()
    update(sim, "nope", "u1")
    update(sim, "add", "u2", "pen", 1)
    sim.seen_message_ids.clear()  # the store dedups by (name, id): another name gets through
    update(sim, "fail", "u2", "again")
    out = sim.run_pass()
    assert [(r.update_id, r.state, r.error_type) for r in out.update_results] == [
        ("u1", "rejected", "UnknownUpdate"),
        ("u2", "rejected", "DuplicateUpdateId"),
    ]


def test_a_failing_update_handler_is_recorded_as_failed(mode: str) -> None:
    sim = Sim(cart, "ann", mode=mode, activities=FAKES)
    sim.run_pass()
    update(sim, "fail", "u1", "no stock")
    out = sim.run_pass()
    assert [(r.state, r.error_type, r.message) for r in out.update_results] == [
        ("failed", "RuntimeError", "no stock")
    ]
    assert sim.types()[-2:] == ["UpdateAccepted", "UpdateCompleted"]


def test_queries_read_state_and_write_nothing(mode: str) -> None:
    sim = Sim(cart, "ann", mode=mode, activities=FAKES)
    sim.run_pass()
    update(sim, "add", "u1", "book", 1)
    sim.run()
    instance = instance_after(sim)
    try:
        assert instance.query("count", b"[]") == b"1"
        assert msgspec.json.decode(instance.query("owner_items", b'["#"]')) == [
            "#ann:reserved:book"
        ]
        next_seq = instance.next_seq
        with pytest.raises(ReadOnlyContextError, match="not allowed in a query"):
            instance.query("sneaky", b"[]")
        with pytest.raises(QueryNotFoundError, match="registered: count, owner_items, sneaky"):
            instance.query("missing", b"[]")
        assert instance.next_seq == next_seq
        assert instance.reusable  # a refused command does not poison the instance
        out = instance.advance(sim.history)
        assert out.new_events == []
    finally:
        instance.close()


@workflow(name="clocked_validator")
async def clocked_validator(ctx: WorkflowContext) -> None:
    @ctx.update(validator=lambda: ctx.random())
    def poke() -> int:
        return 1

    await ctx.wait_signal("never")


def test_a_validator_that_issues_a_command_rejects_the_update(mode: str) -> None:
    sim = Sim(clocked_validator, None, mode=mode, execution_id=uuid.UUID(int=7))
    sim.run_pass()
    update(sim, "poke", "u1")
    out = sim.run_pass()
    assert [(r.state, r.error_type) for r in out.update_results] == [
        ("rejected", "ReadOnlyContextError")
    ]


def test_the_query_and_update_names_are_exported() -> None:
    import azync_flow
    import azync_flow.errors as errors
    import azync_flow.replay as replay

    for name in ("QueryFailedError", "QueryNotFoundError", "QueryTimeoutError"):
        assert getattr(azync_flow, name) is getattr(errors, name)
        assert issubclass(getattr(errors, name), errors.QueryError)
    for name in ("UpdateFailedError", "UpdateRejectedError"):
        assert getattr(azync_flow, name) is getattr(errors, name)
        assert issubclass(getattr(errors, name), errors.UpdateError)
    assert {"QueryError", "UpdateError", "ReadOnlyContextError"} <= set(errors.__all__)
    assert {"UpdateAccepted", "UpdateCompleted"} <= set(replay.__all__)
    assert replay.UpdateAccepted.is_command is False
    assert replay.UpdateCompleted.is_command is True
