"""`azync-flow limits ...`: the concurrency and rate limits and how full they are."""

from __future__ import annotations

import click

from azync_flow._display import age
from azync_flow.client import Client
from azync_flow.limits import ConcurrencyLimit
from azync_flow.store.queue import LimitUsage

from ._common import EXIT_OK, CliError, DbOptions, connect, db_command, example
from ._output import emit, table

__all__ = ["limits"]


@click.group("limits", epilog=example("azync-flow limits list"))
def limits() -> None:
    """Inspect the concurrency and rate limits that workers declared; set a
    task queue's limit."""


def _capacity(u: LimitUsage) -> str:
    per = " per key" if u.spec.per_key else ""
    if u.spec.type == "rate":
        return f"{u.spec.capacity} per {age(u.spec.period)}{per}"
    return f"{u.spec.capacity} in flight{per}"


@limits.command("list", epilog=example("azync-flow limits list", "azync-flow limits list --json"))
@db_command
async def list_cmd(as_json: bool, db: DbOptions) -> int:
    """List limits by name: type, capacity, the kinds and task queues they
    apply to, jobs in flight (a rate limit: starts in the last period, all
    keys) and due jobs waiting to be leased."""
    async with connect(db) as store:
        rows = await Client(store).list_limits()
    if as_json:
        emit({"items": rows})
        return EXIT_OK
    table(
        rows,
        [
            ("NAME", lambda u: u.spec.name),
            ("TYPE", lambda u: u.spec.type),
            ("LIMIT", _capacity),
            ("IN FLIGHT", lambda u: u.in_flight),
            ("WAITING", lambda u: u.waiting),
            ("KEYS", lambda u: u.keys),
            ("KINDS", lambda u: ", ".join(u.kinds)),
            ("TASK QUEUES", lambda u: ", ".join(u.task_queues)),
        ],
        empty="no limits (workers store them when they start)",
    )
    return EXIT_OK


@limits.command(
    "set-queue",
    epilog=example("azync-flow limits set-queue gpu 4", "azync-flow limits set-queue gpu --remove"),
)
@click.argument("task_queue")
@click.argument("max_in_flight", type=click.IntRange(min=1), required=False)
@click.option("--name", default=None, help="The limit's name (default: the task queue's name).")
@click.option("--remove", is_flag=True, help="Remove the task queue's limit.")
@db_command
async def set_queue_cmd(
    task_queue: str,
    max_in_flight: int | None,
    name: str | None,
    remove: bool,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Limit everything in flight on TASK_QUEUE (queue jobs and activities,
    whatever their kind) to MAX_IN_FLIGHT across every worker, or --remove it."""
    if remove == (max_in_flight is not None):
        raise CliError("give MAX_IN_FLIGHT, or --remove")
    limit = None if remove else ConcurrencyLimit(name or task_queue, max_in_flight or 0)
    async with connect(db) as store:
        await Client(store).set_task_queue_limit(task_queue, limit)
    if as_json:
        emit({"task_queue": task_queue, "limit": limit.name if limit else None,
              "max_in_flight": max_in_flight})  # fmt: skip
    elif limit is None:
        click.echo(f"task queue {task_queue!r}: no limit")
    else:
        click.echo(f"task queue {task_queue!r}: at most {max_in_flight} in flight ({limit.name!r})")
    return EXIT_OK
