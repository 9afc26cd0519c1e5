"""`azync-flow workflows ...`: start, inspect and operate workflow executions."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timedelta
from typing import Any

import click
import msgspec

from azync_flow.client import MAX_NOTE_LENGTH, Client, WorkflowHandle
from azync_flow.errors import (
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowTerminatedError,
)
from azync_flow.replay.passes import to_entries
from azync_flow.search import parse_search_assignment, parse_search_filter
from azync_flow.store.queue import DEFAULT_TASK_QUEUE
from azync_flow.store.validate import check_name, check_text
from azync_flow.store.workflows import WorkflowExecutionView, WorkflowRunView, WorkflowState

from ._common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    CliError,
    DbOptions,
    Seconds,
    StrictChoice,
    connect,
    cursor_option,
    db_command,
    db_options,
    decode_cursor,
    encode_cursor,
    example,
    limit_option,
    parse_duration,
    parse_id,
    read_input,
    run_async,
    signal_input,
    signal_options,
)
from ._output import (
    age,
    done,
    emit,
    json_line,
    list_page,
    open_payloads,
    opened_event,
    payload_json,
    preview,
    record,
    rows_out,
    table,
    to_plain,
    when,
)
from ._workflow_interactions import query_cmd, update_cmd
from ._workflow_reset import reset_cmd

STATES = [s.value for s in WorkflowState]


@click.group("workflows", epilog=example("azync-flow workflows list --state running"))
def workflows() -> None:
    """Start, inspect and operate workflow executions."""


# --- reading -----------------------------------------------------------------------


async def _page(
    db: DbOptions,
    name: str | None,
    state: str | None,
    limit: int,
    cursor: str | None,
    where: tuple[str, ...] = (),
) -> tuple[list[WorkflowExecutionView], str | None]:
    if name is not None and not name.strip():
        raise CliError("--name must not be empty: give a workflow name, or leave --name out")
    before = None
    if cursor is not None:
        at, wid = decode_cursor(cursor, 2)
        try:
            before = (datetime.fromisoformat(at), uuid.UUID(wid))
        except ValueError:
            raise CliError(f"--cursor {cursor!r} is not a cursor printed by this list") from None
    filters = [parse_search_filter(w) for w in where]  # bad text: exit 2 before connecting
    async with connect(db) as store:
        got = await Client(store).list(name, state=state, limit=limit, cursor=before, where=filters)
    nxt = None
    if got.next_cursor is not None:
        nxt = encode_cursor(got.next_cursor[0].isoformat(), str(got.next_cursor[1]))
    return got.executions, nxt


def _list_item(v: WorkflowExecutionView) -> dict[str, Any]:
    return {
        "id": v.id,
        "name": v.name,
        "task_queue": v.task_queue,
        "state": v.state,
        "created_at": v.created_at,
        "updated_at": v.updated_at,
        "input_preview": preview(v.input),
        "result_preview": preview(v.result),
        "failure_reason": v.failure_reason,
        "suspend_reason": v.suspend_reason,
        "blocked_reason": v.blocked_reason,
        "parent_id": v.parent_id,
        "run_no": v.run_no,
        "search_attributes": v.search_attributes,
    }


def _search_text(attributes: dict[str, Any]) -> str:
    """Search attributes as ``name=value`` pairs (keywords quoted, instants ISO)."""
    return ", ".join(
        f"{k}={json.dumps(v) if isinstance(v, str) else _plain_value(v)}"
        for k, v in attributes.items()
    )


def _plain_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def _why(v: WorkflowExecutionView) -> str:
    return v.failure_reason or v.suspend_reason or v.blocked_reason or preview(v.result)


@workflows.command(
    "list", epilog=example("azync-flow workflows list --name order --state failed --limit 20")
)
@click.option("--name", default=None, help="Only executions of this workflow.")
@click.option("--state", type=StrictChoice(STATES), help="Only executions in this state.")
@click.option(
    "--where", multiple=True, metavar="FILTER",
    help="Search attribute filter, e.g. 'amount > 1000' or 'customer = \"c-17\"' "
    "(= != < <= > >= in; repeat: all must hold).",
)  # fmt: skip
@limit_option(50)
@cursor_option
@db_command
async def list_cmd(
    name: str | None,
    state: str | None,
    where: tuple[str, ...],
    limit: int,
    cursor: str | None,
    as_json: bool,
    db: DbOptions,
) -> int:
    """List executions, newest first, a page at a time (payloads as previews)."""
    rows, nxt = await _page(db, name, state, limit, cursor, where)
    list_page(
        rows,
        nxt,
        as_json=as_json,
        item=_list_item,
        columns=[
            ("ID", lambda v: v.id),
            ("WORKFLOW", lambda v: v.name),
            ("STATE", lambda v: v.state),
            ("CREATED (UTC)", lambda v: when(v.created_at)),
            ("PARENT", lambda v: v.parent_id or ""),
            ("INPUT", lambda v: preview(v.input)),
            ("RESULT / REASON", _why),
        ],
        empty="no executions",
    )
    return EXIT_OK


@click.command("show", epilog=example("azync-flow workflows show 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def show(id: str, as_json: bool, db: DbOptions) -> int:
    """Show one execution: state, why it is suspended or failed, input and result."""
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(parse_id(id, "execution id"))
        v = await handle.describe()
        runs = await handle.runs()
    if as_json:
        emit({**msgspec.structs.asdict(v), "runs": runs})
        return EXIT_OK
    fields: list[tuple[str, Any]] = [
        ("id", v.id),
        ("workflow", v.name + (f" (version {v.version})" if v.version else "")),
        ("state", v.state),
        ("created", when(v.created_at)),
        ("updated", when(v.updated_at)),
        ("completed", when(v.completed_at)),
    ]
    optional: list[tuple[str, Any]] = [
        ("idempotency key", v.business_idempotency_key),
        ("task queue", v.task_queue),
        ("priority", v.priority or None),
        ("failure reason", v.failure_reason),
        ("suspend reason", v.suspend_reason),
        ("blocked", v.blocked_reason),
        ("waiting on", _waiting_on(v)),
        ("timeouts", _timeouts(v)),
        ("suspended at seq", v.suspend_seq),
        ("suspended on operation", v.suspend_operation_id),
        ("signals undelivered", v.signals_undelivered or None),
        ("parent", v.parent_id),
        ("parent close policy", v.parent_close_policy if v.parent_id else ""),
        ("run", f"{v.run_no} ({v.run_id})" if v.run_no > 1 else ""),
        ("earlier runs", ", ".join(_run_text(r) for r in runs[:-1])),
        (
            "reset from",
            f"run {v.reset_from_run} at seq {v.reset_seq}: {v.reset_reason}"
            if v.reset_from_run
            else "",
        ),
        ("history", f"{v.history_events} events, {v.history_bytes} bytes"),
        (
            "history limit",
            "exceeded: continue_as_new is due" if v.history_limit_exceeded else "",
        ),
        ("meta", ", ".join(f"{k}={val}" for k, val in v.meta.items())),
        ("search attributes", _search_text(v.search_attributes)),
    ]
    fields += [(k, val) for k, val in optional if val not in (None, "")]
    payloads: list[tuple[str, Any]] = [("input", v.input)]
    if v.result is not None:
        payloads.append(("result", v.result))
    record(fields, payloads=payloads)
    return EXIT_OK


def _timeout(value: str | None, what: str) -> timedelta | None:
    """A timeout option: a positive duration, or None when not given."""
    if value is None:
        return None
    duration = parse_duration(value, what)
    if duration <= timedelta(0):
        raise CliError(f"{what} {value!r} must be positive")
    return duration


def _timeouts(v: WorkflowExecutionView) -> str:
    """The execution's timeouts and the deadline of its current run ('' when none)."""
    parts = [
        f"{label} {_seconds(limit)}"
        for label, limit in (("execution", v.execution_timeout), ("run", v.run_timeout))
        if limit is not None
    ]
    if v.timeout_at is not None and v.state in (WorkflowState.RUNNING, WorkflowState.SUSPENDED):
        parts.append(f"deadline {when(v.timeout_at)} UTC")
    return ", ".join(parts)


def _seconds(limit: timedelta) -> str:
    """A timeout as the CLI shows it: ``90s``."""
    return f"{limit.total_seconds():g}s"


def _run_text(r: WorkflowRunView) -> str:
    """An earlier run: its number and id, and for a reset one where and why."""
    text = f"{r.run_no}={r.run_id}"
    if r.state == "reset":
        text += f" (reset at seq {r.reset_seq} while {r.state_at_reset}: {r.reset_reason})"
    return text


def _waiting_on(v: WorkflowExecutionView) -> str:
    """The signals and the timer a live execution waits on ('' when none)."""
    parts = [f"signal {name!r}" for name in v.awaited_signals]
    if v.next_timer_at is not None:
        parts.append(f"timer due {when(v.next_timer_at)} UTC")
    return ", ".join(parts)


_RUN = click.option(
    "--run", "run_no", type=click.IntRange(min=1), default=None,
    help="Run number of a continued-as-new execution (default: the current run).",
)  # fmt: skip


async def _earlier_run(handle: WorkflowHandle[Any], run_no: int | None) -> int | None:
    """``run_no`` when it names an earlier run of the execution, None for the
    current one; CliError (not found) when the execution has no such run."""
    if run_no is None:
        return None
    runs = await handle.runs()  # NotFoundError if no execution
    if run_no > len(runs):
        raise CliError(
            f"execution {handle.id} has no run {run_no} (runs 1..{len(runs)})", EXIT_NOT_FOUND
        )
    return None if run_no == len(runs) else run_no


@workflows.command("history", epilog=example("azync-flow workflows history 3f2a0c9e-... --json"))
@click.argument("id")
@_RUN
@db_command
async def history(id: str, run_no: int | None, as_json: bool, db: DbOptions) -> int:
    """Print an execution's history in seq order (of run --run N of a
    continued execution). With `--json`: one JSON object per line,
    `{"seq", "type", "event"}` (for `jq`); to replay a history, use
    `workflows export`."""
    wid = parse_id(id, "execution id")
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(wid)
        earlier = await _earlier_run(handle, run_no)
        if earlier is not None:
            rows = await store.list_run_history(wid, earlier)
        else:
            rows = await store.list_history(wid)
        if not rows:
            await handle.describe()  # NotFoundError if none
    if as_json:
        for row in rows:
            event = open_payloads(to_plain(row.payload))
            click.echo(json_line({"seq": row.seq, "type": row.type, "event": event}))
        return EXIT_OK
    t0 = rows[0].created_at if rows else None
    entries = to_entries(rows)
    table(
        zip(rows, entries, strict=True),
        [
            ("SEQ", lambda r: r[0].seq),
            ("+TIME", lambda r: age(r[0].created_at - t0) or "0ms"),
            ("EVENT", lambda r: r[0].type),
            ("DETAIL", lambda r: _detail(r[0].type, opened_event(r[1].event).describe())),
        ],
        empty="no events yet",
    )
    return EXIT_OK


def _detail(name: str, described: str) -> str:
    if described.startswith(name):
        described = described[len(name) :].strip("()")
    return described


@workflows.command("export", epilog=example("azync-flow workflows export 3f2a0c9e-... > run.json"))
@click.argument("id")
@_RUN
@db_options
@run_async
async def export(id: str, run_no: int | None, db: DbOptions) -> int:
    """Write an execution's history (of run --run N of a continued execution)
    as the JSON file `replay` reads (`azync-flow replay APP run.json`)."""
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(parse_id(id, "execution id"))
        recorded = await handle.recorded_history(await _earlier_run(handle, run_no))
    sys.stdout.buffer.write(recorded.to_json() + b"\n")
    sys.stdout.flush()
    return EXIT_OK


# --- acting --------------------------------------------------------------------------


@click.command("start", epilog=example("azync-flow workflows start order --input @order.json"))
@click.argument("name")
@click.option("--input", "input_", metavar="JSON", help="Input: JSON, @file or - (stdin).")
@click.option("--id", "id_", help="Execution id, a UUID (default: a new one).")
@click.option("--key", default="", help="Business idempotency key.")
@click.option("--version", default="", help="Workflow version to record.")
@click.option(
    "--task-queue", default=DEFAULT_TASK_QUEUE, show_default=True,
    help="Task queue of the execution (workers serving it run it).",
)  # fmt: skip
@click.option(
    "--priority", type=int, default=0, show_default=True,
    help="Priority (higher first; a minute's head start per unit).",
)  # fmt: skip
@click.option(
    "--execution-timeout", metavar="DURATION",
    help="Fail the execution (WorkflowTimeoutError) if it has not ended this long after "
    "its start, across continue-as-new runs (90s, 15m, 2h, 3d).",
)  # fmt: skip
@click.option(
    "--run-timeout", metavar="DURATION",
    help="Fail the execution if one run has not ended this long after its start.",
)  # fmt: skip
@click.option(
    "--search-attr", "search_attr", multiple=True, metavar="NAME=VALUE",
    help="Search attribute (repeatable): customer=c-17, amount=4999, paid=true, "
    "due=2026-12-02T12:00:00Z; quote a keyword that looks like a number: ref='\"42\"'.",
)  # fmt: skip
@db_command
async def start(
    name: str,
    input_: str | None,
    id_: str | None,
    key: str,
    version: str,
    task_queue: str,
    priority: int,
    execution_timeout: str | None,
    run_timeout: str | None,
    search_attr: tuple[str, ...],
    as_json: bool,
    db: DbOptions,
) -> int:
    """Start an execution of the registered workflow NAME (a worker runs it).
    Starting again with the same --id or --key and input returns the same execution.
    Warns on stderr (exit status still 0) when no live worker serves NAME on the
    task queue."""
    value = read_input(input_, "--input")
    wid = parse_id(id_, "--id") if id_ else None
    limit = _timeout(execution_timeout, "--execution-timeout")
    run_limit = _timeout(run_timeout, "--run-timeout")
    attributes = dict(parse_search_assignment(a) for a in search_attr)
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = await Client(store).start(
            name,
            value,
            id=wid,
            idempotency_key=key,
            version=version,
            task_queue=task_queue,
            priority=priority,
            execution_timeout=limit,
            run_timeout=run_limit,
            search_attributes=attributes,
        )
        live = await store.live_workers_for_workflow(name, task_queue)
    state = "started" if handle.started else "exists"
    done(as_json, {"id": handle.id, "started": handle.started}, f"{state} {handle.id}")
    if not live:
        click.echo(
            f"azync-flow: warning: no live worker serves workflow {name!r} on task queue "
            f"{task_queue!r}; the execution waits until one runs",
            err=True,
        )
    return EXIT_OK


@click.command(
    "signal",
    epilog=example('azync-flow workflows signal 3f2a... approve --payload \'{"by": "ann"}\''),
)
@signal_options
@db_command
async def signal(
    id: str, name: str, payload: str | None, message_id: str, as_json: bool, db: DbOptions
) -> int:
    """Send signal NAME to a running execution (buffered until it waits for it)."""
    wid, value = signal_input(id, name, payload, message_id, "execution id")
    async with connect(db) as store:
        accepted = await Client(store).get_handle(wid).signal(name, value, message_id=message_id)
    text = "signal accepted" if accepted else "duplicate message id: dropped"
    done(as_json, {"accepted": accepted}, text)
    return EXIT_OK


@click.command("cancel", epilog=example("azync-flow workflows cancel 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def cancel(id: str, as_json: bool, db: DbOptions) -> int:
    """Request cancellation: the workflow sees it at its current wait and may clean up."""
    async with connect(db) as store:
        await Client(store).get_handle(parse_id(id, "execution id")).cancel()
    done(as_json, {"cancel_requested": True}, "cancellation requested")
    return EXIT_OK


@click.command(
    "terminate", epilog=example("azync-flow workflows terminate 3f2a... --reason 'typo in name'")
)
@click.argument("id")
@click.option("--reason", required=True, help="Why (recorded in history and on the ledger).")
@click.option("--by", default=None, help="Who (default: user@host).")
@db_command
async def terminate(id: str, reason: str, by: str | None, as_json: bool, db: DbOptions) -> int:
    """End an execution now without running its code (for a run that cannot
    finish by itself; `cancel` lets the code clean up)."""
    wid = parse_id(id, "execution id")
    check_text(reason, "--reason")
    if by is not None:
        check_name(by, "--by")
    async with connect(db) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(wid)
        await handle.terminate(reason, terminated_by=by)
        view = await handle.describe()
    done(
        as_json,
        {"state": view.state, "reason": view.failure_reason},
        f"{view.state}: {view.failure_reason}",
    )
    return EXIT_OK


@click.command(
    "annotate",
    epilog=example("azync-flow workflows annotate 3f2a... --message 'refunded by hand, INC-7'"),
)
@click.argument("id")
@click.option("--message", required=True, help="The note (1 to 4096 characters).")
@click.option("--by", default=None, help="Who (default: user@host).")
@db_command
async def annotate(id: str, message: str, by: str | None, as_json: bool, db: DbOptions) -> int:
    """Append an operator's note to an execution's history (shown by `workflows
    history`; replay skips it, so the execution runs on unchanged)."""
    wid = parse_id(id, "execution id")
    if not message or len(message) > MAX_NOTE_LENGTH:
        raise CliError(f"--message must be 1 to {MAX_NOTE_LENGTH} characters")
    check_text(message, "--message")
    if by is not None:
        check_name(by, "--by")
    async with connect(db) as store:
        seq = await Client(store).get_handle(wid).annotate(message, noted_by=by)
    done(as_json, {"id": wid, "seq": seq}, f"noted at seq {seq}")
    return EXIT_OK


@workflows.command(
    "suspend",
    epilog=example('azync-flow workflows suspend 3f2a0c9e-... --reason "vendor outage"'),
)
@click.argument("id")
@click.option("--reason", required=True, help="Why (shown by `workflows describe`).")
@db_command
async def suspend(id: str, reason: str, as_json: bool, db: DbOptions) -> int:
    """Pause a running execution: no workflow code runs until `workflows resume`
    (signals sent meanwhile are kept)."""
    execution_id = parse_id(id, "execution id")
    async with connect(db) as store:
        await Client(store).get_handle(execution_id).suspend(reason)
    done(as_json, {"id": execution_id, "suspended": True}, f"suspended {execution_id}")
    return EXIT_OK


@workflows.command(
    "complete",
    epilog=example(
        "azync-flow workflows complete 3f2a0c9e-... --result '{\"paid\": true}' "
        '--reason "paid by hand"'
    ),
)
@click.argument("id")
@click.option("--result", "result", required=True, help="The result: JSON, @file or - (stdin).")
@click.option("--reason", required=True, help="Why (recorded in history).")
@db_command
async def complete(id: str, result: str, reason: str, as_json: bool, db: DbOptions) -> int:
    """Close a running or suspended execution as succeeded with a result, without
    running its code."""
    execution_id = parse_id(id, "execution id")
    value = read_input(result, "--result")
    async with connect(db) as store:
        await Client(store).get_handle(execution_id).complete(value, reason=reason)
    done(as_json, {"id": execution_id, "state": "succeeded"}, f"completed {execution_id}")
    return EXIT_OK


@workflows.command(
    "fail", epilog=example('azync-flow workflows fail 3f2a0c9e-... --reason "order voided"')
)
@click.argument("id")
@click.option("--reason", required=True, help="Why (the execution's failure reason).")
@db_command
async def fail(id: str, reason: str, as_json: bool, db: DbOptions) -> int:
    """Close a running or suspended execution as failed, without running its code."""
    execution_id = parse_id(id, "execution id")
    async with connect(db) as store:
        await Client(store).get_handle(execution_id).fail(reason)
    done(as_json, {"id": execution_id, "state": "failed"}, f"failed {execution_id}")
    return EXIT_OK


@workflows.command("resume", epilog=example("azync-flow workflows resume 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def resume(id: str, as_json: bool, db: DbOptions) -> int:
    """Resume a suspended execution (after fixing its code, deciding its operation,
    or an operator's `workflows suspend`)."""
    async with connect(db) as store:
        await Client(store).get_handle(parse_id(id, "execution id")).resume()
    done(as_json, {"resumed": True}, "resumed")
    return EXIT_OK


@click.command("result", epilog=example("azync-flow workflows result 3f2a0c9e-... --timeout 30"))
@click.argument("id")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to wait (default: forever).",
)
@db_command
async def result(id: str, timeout: float | None, as_json: bool, db: DbOptions) -> int:  # noqa: ASYNC109
    """Wait for an execution to finish and print its result (exit 1 if it failed,
    was cancelled or terminated; 6 on --timeout)."""
    wid = parse_id(id, "execution id")
    async with connect(db) as store:
        client = Client(store)
        try:
            value: Any = await client.get_handle(wid).result(timeout=timeout)
        except (WorkflowFailedError, WorkflowCancelledError, WorkflowTerminatedError) as exc:
            state = next(name for kind, name in _ENDED.items() if isinstance(exc, kind))
            done(as_json, {"state": state, "error": str(exc)}, f"{state}: {exc}")
            return EXIT_FAILED
        finally:
            await client.close()
    if as_json:
        emit(value)
    else:
        record([], payloads=[("result", to_plain(value))])
    return EXIT_OK


@click.command("stalled", epilog=example("azync-flow workflows stalled --older-than 600"))
@click.option(
    "--older-than", type=Seconds(), default=0.0,
    show_default=True, help="Only executions unchanged for at least this many seconds.",
)  # fmt: skip
@limit_option(100)
@db_command
async def stalled(older_than: float, limit: int, as_json: bool, db: DbOptions) -> int:
    """List running executions with nothing pending (no task, operation, timer or
    awaited signal): runs that will not move on their own."""
    if older_than < 0:
        raise CliError("--older-than must not be negative")
    async with connect(db) as store:
        rows = await Client(store).list_stalled(timedelta(seconds=older_than), limit=limit)
    rows_out(
        rows,
        as_json=as_json,
        columns=[
            ("ID", lambda r: r.id),
            ("WORKFLOW", lambda r: r.name),
            ("UNCHANGED SINCE", lambda r: when(r.updated_at)),
        ],
        empty="no stalled executions",
    )
    return EXIT_OK


#: The state a ``result`` error reports.
_ENDED: dict[type[Exception], str] = {
    WorkflowFailedError: "failed",
    WorkflowCancelledError: "cancelled",
    WorkflowTerminatedError: "terminated",
}


for _cmd in (
    show,
    start,
    signal,
    cancel,
    terminate,
    annotate,
    reset_cmd,
    result,
    stalled,
    query_cmd,
    update_cmd,
):
    workflows.add_command(_cmd)


__all__ = ["payload_json", "workflows"]
