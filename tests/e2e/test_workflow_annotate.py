"""An operator's note (``handle.annotate``, ``azync-flow workflows annotate``) in
a real execution's history: a real worker runs the workflow on past it, in both
cache modes, also when the note lands while a pass is committing; the
recorded history with notes replays; bad input and unknown ids are refused."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow import activity, workflow
from azync_flow.client import MAX_NOTE_LENGTH, Client
from azync_flow.errors import NotFoundError
from azync_flow.replay import OperatorNote, Replayer
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.e2e.test_cli_commands import Cmd
from tests.local_runtime import LocalRuntime


@activity(name="an_double")
async def double(n: int) -> int:
    return 2 * n


@workflow(name="an_order")
async def order(ctx: WorkflowContext, n: int) -> int:
    first = await double(n)
    await ctx.wait_signal("go")
    await ctx.sleep(timedelta(milliseconds=10))
    return first + await double(first)


REGISTRY = Registry([order], [double])


def notes(history: list) -> list[tuple[int, str, str]]:
    return [
        (e.seq, e.event.message, e.event.noted_by)
        for e in history
        if isinstance(e.event, OperatorNote)
    ]


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["sticky", "full"])
async def test_a_noted_execution_runs_on_as_without_the_note(
    store: PostgresStore, cache_size: int
) -> None:
    runtime = LocalRuntime(store, REGISTRY, cache_size=cache_size)
    client = Client(store)
    handle = await client.start(order, 3)
    await runtime.run_until_idle()  # the first activity ran; the code waits for "go"
    seq = await handle.annotate("checked stock by hand", noted_by="ann")
    await handle.signal("go")
    await runtime.run_until_idle()
    assert await handle.result(timeout=10) == 6 + 12
    after = await handle.annotate("closed INC-7")
    history = await handle.history()
    assert [s for s, *_ in notes(history)] == [seq, after]
    assert notes(history)[0][1:] == ("checked stock by hand", "ann")
    assert "@" in notes(history)[1][2]  # user@host by default
    assert [e.seq for e in history] == list(range(1, len(history) + 1))  # no gap, no reuse
    # the recorded history, notes included, replays against the code
    verdict = Replayer(REGISTRY).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error


async def test_a_note_landing_while_a_pass_commits_is_replayed_in(store: PostgresStore) -> None:
    runtime = LocalRuntime(store, REGISTRY, cache_size=1000)
    armed: set[uuid.UUID] = set()
    noted: list[int] = []

    async def before_commit(run_id: uuid.UUID, path: str) -> None:
        if run_id in armed:  # an operator's note lands between this pass's load and commit
            armed.discard(run_id)
            noted.append(await Client(store).get_handle(run_id).annotate("mid-pass"))

    runtime.workflows.before_commit = before_commit
    client = Client(store)
    async with runtime.worker:
        handle = await client.start(order, 5)
        armed.add(handle.id)
        await handle.signal("go")
        assert await handle.result(timeout=15) == 10 + 20
    assert runtime.workflows.conflicts >= 1  # the pass lost its commit and ran again
    history = await handle.history()
    assert [s for s, *_ in notes(history)] == noted
    assert [e.seq for e in history] == list(range(1, len(history) + 1))


async def test_annotate_an_unknown_execution_is_not_found(store: PostgresStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match=str(missing)):
        await Client(store).get_handle(missing).annotate("hello")


@pytest.mark.parametrize(
    ("message", "error"),
    [("", ValueError), ("x" * (MAX_NOTE_LENGTH + 1), ValueError), (7, TypeError)],
)
async def test_annotate_refuses_a_message_out_of_bounds(
    store: PostgresStore, message: object, error: type[Exception]
) -> None:
    handle = await Client(store).start(order, 1)
    with pytest.raises(error, match="message must be"):
        await handle.annotate(message)  # type: ignore[arg-type]
    assert notes(await handle.history()) == []


async def test_the_cli_appends_a_note_and_refuses_bad_input(
    store: PostgresStore, pg_dsn: str
) -> None:
    cmd = Cmd(pg_dsn, store.schema)
    handle = await Client(store).start(order, 1)
    wid = str(handle.id)
    ran = await cmd("workflows", "annotate", wid, "--message", "paged", "--by", "oncall", "--json")
    assert ran.code == 0, ran.err
    assert ran.json == {"id": wid, "seq": 1}
    assert notes(await handle.history()) == [(1, "paged", "oncall")]
    for message in ("", "x" * (MAX_NOTE_LENGTH + 1)):
        ran = await cmd("workflows", "annotate", wid, "--message", message)
        assert ran.code == 2
        assert "--message must be 1 to 4096 characters" in ran.err
    ran = await cmd("workflows", "annotate", wid, "--message", "m", "--by", "")
    assert ran.code == 2
    assert (await cmd("workflows", "annotate", "not-a-uuid", "--message", "m")).code == 2
    missing = await cmd("workflows", "annotate", str(uuid.uuid4()), "--message", "m")
    assert missing.code == 3
    assert "does not exist" in missing.err
    assert notes(await handle.history()) == [(1, "paged", "oncall")]  # nothing more written
    shown = await cmd("workflows", "history", wid)
    assert "OperatorNote" in shown.out
    assert "paged by oncall" in shown.out
