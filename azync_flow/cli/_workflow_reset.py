"""`azync-flow workflows reset`: a new run of an execution from a point of its
current run's history, with the code the workers run now."""

from __future__ import annotations

from typing import Any

import click

from azync_flow.client import Client, WorkflowHandle
from azync_flow.replay.reset import ResetTarget
from azync_flow.store.validate import check_text

from ._common import EXIT_OK, CliError, DbOptions, connect, db_command, example, parse_id
from ._output import done

__all__ = ["reset_cmd"]


@click.command(
    "reset",
    epilog=example("azync-flow workflows reset 3f2a0c9e-... --first-failure --reason 'fixed #12'"),
)
@click.argument("id")
@click.option("--to-seq", type=int, default=None, help="Keep events 1..N of the current run.")
@click.option(
    "--first-failure", is_flag=True, help="Keep the events before the run's first failure."
)
@click.option(
    "--last-task", is_flag=True, help="Drop what the last workflow task wrote and run it again."
)
@click.option("--reason", required=True, help="Why (kept with the old run, shown by show).")
@db_command
async def reset_cmd(
    id: str,
    to_seq: int | None,
    first_failure: bool,
    last_task: bool,
    reason: str,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Start a new run of an execution that keeps its current run's history up
    to a point and continues from there with the current code; activities
    completed before the point are not run again, signals consumed after it are
    delivered again in their order. The old run stays (marked reset); a running
    one ends. Give exactly one of --to-seq, --first-failure, --last-task."""
    wid = parse_id(id, "execution id")
    check_text(reason, "--reason")
    given = [to_seq is not None, first_failure, last_task]
    if sum(given) != 1:
        raise CliError("give exactly one of --to-seq N, --first-failure, --last-task")
    to: ResetTarget | None = (
        "first_failure" if first_failure else "last_task" if last_task else None
    )
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(wid)
        got = await handle.reset(to_seq, reason=reason, to=to)
    done(
        as_json,
        {
            "id": wid,
            "run_no": got.run_no,
            "run_id": got.run_id,
            "kept": got.kept,
            "previous_state": got.previous_state,
            "rerun_activities": got.rerun_activities,
            "redelivered_signals": got.redelivered_signals,
        },
        f"reset {wid}: run {got.run_no} ({got.run_id}) keeps "
        f"{f'events 1..{got.kept}' if got.kept else 'no event'} of run "
        f"{got.run_no - 1} (was {got.previous_state}); {got.rerun_activities} activities "
        f"to run again, {got.redelivered_signals} signals to deliver again",
    )
    return EXIT_OK
