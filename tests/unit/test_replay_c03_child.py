"""Workflows for the cross-process replay test, and the child-process entry point.

Kept free of pytest imports so 20 child processes start fast.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from azync_flow import activity, workflow
from azync_flow.replay import RecordedHistory, Replayer
from azync_flow.workflow import WorkflowContext


@activity(name="C3")
def c3(x: str) -> str:
    return x


@workflow(name="c03_wait")
async def c03_wait(ctx: WorkflowContext, _: None) -> list[str]:
    tasks = [asyncio.ensure_future(c3(x)) for x in ("x", "y", "z")]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    first = [await c3("B:" + t.result()) for t in done]
    rest = await asyncio.gather(*(t for t in tasks if t in pending))
    return first + list(rest)


@workflow(name="c03_gather")
async def c03_gather(ctx: WorkflowContext, _: None) -> list[str]:
    results = await asyncio.gather(c3("x"), c3("y"), c3("z"))
    return [await c3("B:" + r) for r in results]


@workflow(name="c03_set_order")
async def c03_set_order(ctx: WorkflowContext, _: None) -> list[str]:
    """Iterates the *set* asyncio.wait returns: order must not depend on addresses."""
    tasks = [asyncio.ensure_future(c3(x)) for x in ("x", "y", "z", "w", "v", "u")]
    done, _pending = await asyncio.wait(tasks)
    return [await c3("B:" + t.result()) for t in done]


def main(paths: list[str]) -> None:
    """Replay each history file and print OK/FAIL per file (child process entry)."""
    for path in paths:
        history = RecordedHistory.from_json(Path(path).read_bytes())
        result = Replayer([c03_wait, c03_gather, c03_set_order]).replay(history)
        print("OK" if result.ok else f"FAIL:{result.error}", flush=True)
