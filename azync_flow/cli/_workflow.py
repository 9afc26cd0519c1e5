"""``azync-flow workflow start|signal|describe|history|cancel|terminate|result|list|stalled``."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from azync_flow.client import Client, WorkflowHandle
from azync_flow.errors import (
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowTerminatedError,
)
from azync_flow.store import WorkflowState

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    add_db_args,
    connect,
    emit,
    parse_id,
    parse_json,
    payload_json,
    to_plain,
)


def register(sub: Any) -> None:
    wf = sub.add_parser("workflow", help="start and inspect workflow executions")
    verbs = wf.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("start", help="start an execution by workflow name")
    p.add_argument("name", help="registered workflow name")
    p.add_argument(
        "--input", help="input as JSON, @FILE to read it from a file, - for stdin (default: null)"
    )
    p.add_argument("--id", help="execution id (default: a new UUID)")
    p.add_argument("--key", default="", help="business idempotency key")
    p.add_argument("--version", default="", help="workflow version to record")
    p.set_defaults(run=_start)

    p = verbs.add_parser("signal", help="send a signal to an execution")
    p.add_argument("id")
    p.add_argument("name")
    p.add_argument("--payload", help="payload as JSON, @FILE or - for stdin (default: null)")
    p.add_argument("--message-id", default="", help="deduplication id")
    p.set_defaults(run=_signal)

    for verb, fn, text in (
        ("describe", _describe, "show an execution's state, input and result"),
        ("history", _history, "print an execution's history, one event per line"),
        ("cancel", _cancel, "request cancellation"),
    ):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("id")
        p.set_defaults(run=fn)

    p = verbs.add_parser(
        "terminate",
        help="end an execution now without running its code (cancel asks it to clean up)",
    )
    p.add_argument("id")
    p.add_argument("--reason", required=True, help="why; recorded in history and on the ledger")
    p.add_argument("--by", default=None, help="who (default: user@host)")
    p.set_defaults(run=_terminate)

    p = verbs.add_parser("result", help="wait for an execution's result")
    p.add_argument("id")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait (default: ever)")
    p.set_defaults(run=_result)

    p = verbs.add_parser("list", help="list executions, newest first")
    p.add_argument("--state", choices=[s.value for s in WorkflowState])
    p.add_argument("--name", default="")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(run=_list)

    p = verbs.add_parser(
        "stalled",
        help="list running executions with nothing pending (no task, operation, "
        "timer or awaited signal): runs that will not move on their own",
    )
    p.add_argument(
        "--older-than",
        type=float,
        default=0.0,
        help="only executions unchanged for at least this many seconds (default: 0)",
    )
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(run=_stalled)

    for parser in verbs.choices.values():
        add_db_args(parser, embedded_fallback=False)


async def _start(args: argparse.Namespace) -> int:
    value = parse_json(args.input, "--input")
    wid = parse_id(args.id, "--id") if args.id else None
    async with connect(args) as store:
        handle = await Client(store).start(
            args.name, value, id=wid, idempotency_key=args.key, version=args.version
        )
    emit({"id": handle.id, "started": handle.started})
    return EXIT_OK


async def _signal(args: argparse.Namespace) -> int:
    payload = parse_json(args.payload, "--payload")
    async with connect(args) as store:
        accepted = (
            await Client(store)
            .get_handle(parse_id(args.id))
            .signal(args.name, payload, message_id=args.message_id)
        )
    emit({"accepted": accepted})
    return EXIT_OK


async def _describe(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        emit(await Client(store).get_handle(parse_id(args.id)).describe())
    return EXIT_OK


async def _history(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        rows = await store.list_history(parse_id(args.id))
        if not rows:
            await store.get_workflow_execution(parse_id(args.id))  # NotFoundError if none
    for row in rows:
        emit_line = {"seq": row.seq, "type": row.type, "event": payload_json(row.payload)}
        print(to_json_line(emit_line))
    return EXIT_OK


def to_json_line(value: Any) -> str:
    import json

    return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))


async def _cancel(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        await Client(store).get_handle(parse_id(args.id)).cancel()
    emit({"cancel_requested": True})
    return EXIT_OK


async def _terminate(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        handle: WorkflowHandle[Any] = Client(store).get_handle(parse_id(args.id))
        await handle.terminate(args.reason, terminated_by=args.by)
        view = await handle.describe()
    emit({"state": view.state, "reason": view.failure_reason})
    return EXIT_OK


async def _result(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        try:
            value: Any = (
                await Client(store).get_handle(parse_id(args.id)).result(timeout=args.timeout)
            )
        except (WorkflowFailedError, WorkflowCancelledError, WorkflowTerminatedError) as exc:
            emit({"state": _ENDED[type(exc)], "error": str(exc)})
            return EXIT_FAILED
    emit(value)
    return EXIT_OK


async def _list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1")
    async with connect(args) as store:
        page = await Client(store).list(args.name or None, state=args.state, limit=args.limit)
    emit(page.executions)
    return EXIT_OK


async def _stalled(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1")
    if args.older_than < 0:
        raise CliError("--older-than must not be negative")
    async with connect(args) as store:
        rows = await Client(store).list_stalled(
            timedelta(seconds=args.older_than), limit=args.limit
        )
    emit(rows)
    return EXIT_OK


_ENDED: dict[type[Exception], str] = {
    WorkflowFailedError: "failed",
    WorkflowCancelledError: "cancelled",
    WorkflowTerminatedError: "terminated",
}

__all__ = ["register"]
