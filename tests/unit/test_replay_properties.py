"""Property tests: random workflow programs replayed against their own history.

A program (the workflow input) is a list of steps — sequential activities,
gathers, timers, signal waits with and without timeouts, races, now/uuid —
interpreted by one workflow. A random environment completes or fails
operations in random order, fires timers and sends signals. Properties:

* replaying the history at every pass boundary issues no new commands and no
  new events (a recorded history is always self-consistent);
* the sticky cache and full replay produce byte-identical histories;
* a completed history replays to the same result.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from azync_flow import activity, workflow
from azync_flow.errors import ActivityError
from azync_flow.replay import PassStatus, RecordedHistory, Replayer
from azync_flow.workflow import WorkflowContext
from tests.unit.test_replay_sim import Sim


@activity(name="P")
def act_p(x: str) -> str:
    return f"p:{x}"


@workflow(name="program")
async def program(ctx: WorkflowContext, steps: list[list[Any]]) -> list[Any]:
    out: list[Any] = []
    for index, step in enumerate(steps):
        kind = step[0]
        try:
            if kind == "act":
                out.append(await act_p(f"{index}"))
            elif kind == "gather":
                calls = (act_p(f"{index}.{j}") for j in range(step[1]))
                out.extend(await asyncio.gather(*calls, return_exceptions=True))
            elif kind == "sleep":
                await ctx.sleep(step[1])
                out.append("slept")
            elif kind == "signal":
                out.append(await ctx.wait_signal(step[1]))
            elif kind == "signal_timeout":
                try:
                    out.append(await ctx.wait_signal(step[1], timeout=step[2]))
                except TimeoutError:
                    out.append("timeout")
            elif kind == "race":
                done, pending = await ctx.wait(
                    [act_p(f"{index}.r"), ctx.sleep(step[1])],
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for task in pending:
                    task.cancel()
                out.append(len(done))
            elif kind == "now":
                out.append(ctx.now().isoformat())
            elif kind == "uuid":
                out.append(str(ctx.uuid4()))
            elif kind == "patch" and ctx.patched(step[1]):
                out.append(await act_p(f"{index}.patched"))
        except ActivityError as err:
            out.append(f"failed:{err.seq}")
    return [repr(v) if isinstance(v, BaseException) else v for v in out]


SIGNALS = ("s1", "s2")
step = st.one_of(
    st.tuples(st.just("act")),
    st.tuples(st.just("gather"), st.integers(1, 4)),
    st.tuples(st.just("sleep"), st.integers(1, 50)),
    st.tuples(st.just("signal"), st.sampled_from(SIGNALS)),
    st.tuples(st.just("signal_timeout"), st.sampled_from(SIGNALS), st.integers(1, 50)),
    st.tuples(st.just("race"), st.integers(1, 50)),
    st.tuples(st.just("now")),
    st.tuples(st.just("uuid")),
    st.tuples(st.just("patch"), st.sampled_from(("p1", "p2"))),
).map(list)


def drive(
    steps: list[list[Any]], choices: list[int], mode: str, cancel_at: int | None = None
) -> Sim:
    """Run the program under a scripted random environment, checking every pass."""
    sim = Sim(program, steps, mode=mode, activities={"P": act_p})
    outcome = sim.run_pass()
    check_replay(sim)
    for index, choice in enumerate(choices):
        if outcome.status is not PassStatus.BLOCKED:
            break
        action = choice % 5
        if index == cancel_at:
            sim.cancel_requested = True  # the program does not catch it: ends cancelled
        elif action in (0, 1) and sim.ops:
            pending = sorted(sim.ops)
            seq = pending[choice // 5 % len(pending)]
            if choice % 7 == 0:
                sim.fail(seq, "ValueError", "nope")
            else:
                sim.complete(seq, f"r{seq}")
        elif action == 2 and sim.timers:
            sim.clock = max(sim.clock, min(sim.timers.values()))
        elif action == 3:
            sim.signal(SIGNALS[choice // 5 % 2], choice)
        else:
            sim.advance(choice % 20)
        outcome = sim.run_pass()
        assert outcome.status is not PassStatus.NONDETERMINISM, outcome.error
        check_replay(sim)
    return sim


def check_replay(sim: Sim) -> None:
    history = RecordedHistory.from_rows("program", sim.input, sim.history, sim.info.execution_id)
    result = Replayer([program]).replay(history)
    assert result.ok, result.error
    assert result.outcome.commands == []
    assert result.outcome.new_events == []
    if sim.status is PassStatus.COMPLETED:
        assert result.outcome.result == sim.outcomes[-1].result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=1, max_size=8),
    choices=st.lists(st.integers(0, 10_000), min_size=10, max_size=40),
    cancel_at=st.none() | st.integers(0, 40),
)
def test_random_programs_replay_cleanly_and_cache_modes_agree(
    steps: list[list[Any]], choices: list[int], cancel_at: int | None
) -> None:
    full = drive(steps, choices, "full", cancel_at)
    sticky = drive(steps, choices, "sticky", cancel_at)
    assert [msgspec.json.encode(e) for e in full.history] == [
        msgspec.json.encode(e) for e in sticky.history
    ]
    assert [o.status for o in full.outcomes] == [o.status for o in sticky.outcomes]
