"""`azync-flow dags ...`: inspect and operate DAG runs (through `DAGClient`)."""

from __future__ import annotations

from typing import Any

import click

from azync_flow.dag import DAGClient
from azync_flow.store.dags import DAGState, DAGView
from azync_flow.store.queue import Job
from azync_flow.store.validate import check_text

from ._common import (
    EXIT_OK,
    DbOptions,
    StrictChoice,
    connect,
    cursor_option,
    db_command,
    example,
    limit_option,
    next_offset_cursor,
    offset_cursor,
    parse_id,
    signal_input,
    signal_options,
)
from ._output import (
    age,
    done,
    emit,
    list_page,
    preview,
    record,
    table,
    when,
)


@click.group("dags", epilog=example("azync-flow dags list --state suspended"))
def dags() -> None:
    """Inspect and operate DAG runs (sagas)."""


def _item(v: DAGView) -> dict[str, Any]:
    return {
        "id": v.id,
        "name": v.name,
        "state": v.state,
        "on_failure": v.on_failure,
        "idempotency_key": v.idempotency_key,
        "failure_reason": v.failure_reason,
        "created_at": v.created_at,
        "updated_at": v.updated_at,
        "completed_at": v.completed_at,
    }


@dags.command("list", epilog=example("azync-flow dags list --name checkout --limit 20"))
@click.option("--name", default="", help="Only runs of this DAG.")
@click.option("--state", type=StrictChoice([s.value for s in DAGState]), help="Only this state.")
@limit_option(50)
@cursor_option
@db_command
async def list_cmd(
    name: str, state: str | None, limit: int, cursor: str | None, as_json: bool, db: DbOptions
) -> int:
    """List runs, newest first, a page at a time."""
    offset = offset_cursor(cursor)
    async with connect(db) as store:
        rows, total = await DAGClient(store).list(
            dag=name, state=DAGState(state) if state else None, offset=offset, limit=limit
        )
    list_page(
        rows,
        next_offset_cursor(offset, len(rows), total),
        total=total,
        as_json=as_json,
        item=_item,
        columns=[
            ("ID", lambda v: v.id),
            ("DAG", lambda v: v.name),
            ("STATE", lambda v: v.state),
            ("CREATED (UTC)", lambda v: when(v.created_at)),
            ("UPDATED (UTC)", lambda v: when(v.updated_at)),
            ("REASON", lambda v: v.failure_reason),
        ],
        empty="no DAG runs",
    )
    return EXIT_OK


@dags.command("show", epilog=example("azync-flow dags show 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def show(id: str, as_json: bool, db: DbOptions) -> int:
    """Show one run: state, failure reason, and how many tasks are in each state."""
    run_id = parse_id(id, "DAG run id")
    async with connect(db) as store:
        client = DAGClient(store)
        v = await client.get(run_id)
        counts = (await client.task_counts([run_id])).get(run_id, {})
    tasks = {str(k): n for k, n in sorted(counts.items()) if n}
    if as_json:
        emit({**_item(v), "meta": v.meta, "tasks": tasks})
        return EXIT_OK
    fields: list[tuple[str, Any]] = [
        ("id", v.id),
        ("dag", v.name),
        ("state", v.state),
        ("on failure", v.on_failure),
        ("created", when(v.created_at)),
        ("updated", when(v.updated_at)),
        ("completed", when(v.completed_at)),
        ("tasks", ", ".join(f"{k} {n}" for k, n in tasks.items())),
    ]
    optional = [
        ("idempotency key", v.idempotency_key),
        ("failure reason", v.failure_reason),
        ("meta", ", ".join(f"{k}={val}" for k, val in v.meta.items())),
    ]
    record(fields + [(k, val) for k, val in optional if val])
    return EXIT_OK


def _task(j: Job) -> dict[str, Any]:
    return {
        "id": j.id,
        "key": j.task_key,
        "kind": j.kind,
        "state": j.state,
        "attempt": j.attempt,
        "max_attempts": j.max_attempts,
        "last_error": j.last_error,
        "compensation_kind": j.compensation_kind,
        "signal_name": j.signal_name,
        "payload_preview": preview(j.payload),
        "result_preview": preview(j.result),
    }


@dags.command("tasks", epilog=example("azync-flow dags tasks 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def tasks(id: str, as_json: bool, db: DbOptions) -> int:
    """List a run's tasks in creation order (compensations last)."""
    async with connect(db) as store:
        rows = await DAGClient(store).tasks(parse_id(id, "DAG run id"))
    if as_json:
        emit([_task(j) for j in rows])
        return EXIT_OK
    table(
        rows,
        [
            ("KEY", lambda j: j.task_key),
            ("KIND", lambda j: j.kind),
            ("STATE", lambda j: j.state),
            ("ATTEMPT", lambda j: f"{j.attempt}/{j.max_attempts}" if j.max_attempts else j.attempt),
            (
                "RAN",
                lambda j: (
                    age(j.completed_at - j.started_at) if j.completed_at and j.started_at else ""
                ),
            ),
            ("RESULT / ERROR", lambda j: j.last_error or preview(j.result)),
        ],
        empty="no tasks",
    )
    return EXIT_OK


@dags.command(
    "signal", epilog=example('azync-flow dags signal 3f2a... approved --payload \'{"by": "ann"}\'')
)
@signal_options
@db_command
async def signal(
    id: str, name: str, payload: str | None, message_id: str, as_json: bool, db: DbOptions
) -> int:
    """Send signal NAME to a live run (buffered until its task waits for it)."""
    run_id, value = signal_input(id, name, payload, message_id, "DAG run id")
    async with connect(db) as store:
        got = await DAGClient(store).signal(run_id, name, value, message_id=message_id)
    if as_json:
        emit({"delivered": got.delivered, "deduplicated": got.deduplicated})
    elif got.deduplicated:
        click.echo("duplicate message id: dropped")
    else:
        click.echo(f"delivered to {got.delivered} task(s)" if got.delivered else "buffered")
    return EXIT_OK


def _verb(name: str, text: str, past: str, method: str) -> None:
    @dags.command(name, help=text, epilog=example(f"azync-flow dags {name} 3f2a0c9e-..."))
    @click.argument("id")
    @db_command
    async def command(id: str, as_json: bool, db: DbOptions) -> int:
        run_id = parse_id(id, "DAG run id")
        async with connect(db) as store:
            await getattr(DAGClient(store), method)(run_id)
        done(as_json, {"id": run_id, past: True}, f"{past} {run_id}")
        return EXIT_OK


_verb("retry", "Reset dead tasks, release paused ones and resume the run.", "retried", "retry")
_verb(
    "compensate",
    "Start compensation of a running or suspended run by hand.",
    "compensating",
    "compensate",
)
_verb("cancel", "Cancel a live run without compensating.", "cancelled", "cancel")


@dags.command("pause", epilog=example("azync-flow dags pause 3f2a... --reason 'supplier outage'"))
@click.argument("id")
@click.option("--reason", default="", help="Why (kept on the run).")
@db_command
async def pause(id: str, reason: str, as_json: bool, db: DbOptions) -> int:
    """Freeze a running run: no new task starts until `dags retry`."""
    run_id = parse_id(id, "DAG run id")
    check_text(reason, "--reason")
    async with connect(db) as store:
        await DAGClient(store).pause(run_id, reason)
    done(as_json, {"id": run_id, "paused": True}, f"paused {run_id}")
    return EXIT_OK


__all__ = ["dags"]
