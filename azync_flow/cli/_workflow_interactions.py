"""`azync-flow workflows query` / `update`: ask a running (or finished) execution
a question, or send it an update and print the handler's result."""

from __future__ import annotations

import uuid
from typing import Any

import click

from azync_flow.client import Client
from azync_flow.errors import (
    QueryFailedError,
    QueryNotFoundError,
    QueryTimeoutError,
    UpdateError,
)

from ._common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    CliError,
    DbOptions,
    connect,
    db_command,
    example,
    parse_id,
    read_input,
)
from ._output import done, emit, record, to_plain

__all__ = ["query_cmd", "update_cmd"]


def _args(value: str | None) -> list[Any]:
    args = read_input(value, "ARGS")
    if args is None:
        return []
    if not isinstance(args, list):
        raise CliError(
            "ARGS must be a JSON array of the handler's arguments, e.g. '[\"sku-1\", 2]'"
        )
    return args


def _print(value: Any, as_json: bool) -> None:
    if as_json:
        emit(value)
    else:
        record([], payloads=[("result", to_plain(value))])


@click.command("query", epilog=example("azync-flow workflows query 3f2a0c9e-... summary '[]'"))
@click.argument("id")
@click.argument("name")
@click.argument("args", required=False, metavar="[ARGS]")
@click.option(
    "--timeout", type=float, default=10.0, show_default=True,
    help="Seconds to wait for a worker's answer.",
)  # fmt: skip
@db_command
async def query_cmd(
    id: str,
    name: str,
    args: str | None,
    timeout: float,  # noqa: ASYNC109 - a CLI option
    as_json: bool,
    db: DbOptions,
) -> int:
    """Call query handler NAME of execution ID and print its result. ARGS is a JSON
    array of arguments (inline, @file or -). A worker that registers the workflow
    answers; nothing is written to history. Exit 3 for an unknown query, 1 when
    the handler failed (the error on stderr; with --json its fields on stdout),
    6 when no worker answered in time."""
    wid = parse_id(id, "execution id")
    values = _args(args)
    async with connect(db) as store:
        client = Client(store)
        try:
            value = await client.get_handle(wid).query(name, *values, timeout=timeout)
        except QueryTimeoutError as exc:
            raise CliError(str(exc), EXIT_TIMEOUT) from None
        except QueryNotFoundError as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from None
        except QueryFailedError as exc:
            if not as_json:
                raise CliError(str(exc), EXIT_FAILED) from None
            outcome = {"code": exc.code, "error": exc.error_type, "message": exc.message}
            done(as_json, outcome, str(exc))
            return EXIT_FAILED
        finally:
            await client.close()
    _print(value, as_json)
    return EXIT_OK


@click.command(
    "update", epilog=example("azync-flow workflows update 3f2a0c9e-... add_item '[\"sku-1\", 2]'")
)
@click.argument("id")
@click.argument("name")
@click.argument("args", required=False, metavar="[ARGS]")
@click.option("--update-id", default=None, help="Deduplication id (default: a new UUID).")
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=None,
    help="Seconds to wait (default: forever).",
)  # fmt: skip
@db_command
async def update_cmd(
    id: str,
    name: str,
    args: str | None,
    update_id: str | None,
    timeout: float | None,  # noqa: ASYNC109 - a CLI option
    as_json: bool,
    db: DbOptions,
) -> int:
    """Send update NAME to running execution ID and print the handler's result.
    ARGS is a JSON array of arguments (inline, @file or -). The same --update-id
    runs the handler once and prints the same outcome. Exit 1 when the update was
    rejected or failed (the error on stderr; with --json its fields on stdout),
    6 on --timeout (the update goes on: call again with the same --update-id,
    printed in the message, to get its outcome)."""
    wid = parse_id(id, "execution id")
    values = _args(args)
    update_id = update_id or str(uuid.uuid4())  # named in the timeout message
    async with connect(db) as store:
        client = Client(store)
        try:
            value = await client.get_handle(wid).update(
                name, *values, update_id=update_id, timeout=timeout
            )
        except UpdateError as exc:
            if not as_json:
                raise CliError(str(exc), EXIT_FAILED) from None
            outcome = {"update_id": exc.update_id, "error": exc.error_type, "message": exc.message}
            done(as_json, {"code": exc.code, **outcome}, str(exc))
            return EXIT_FAILED
        except TimeoutError:
            raise CliError(
                f"update {name!r} of execution {wid} has no outcome after {timeout or 0:g}s: it is "
                "still queued or in progress; get its outcome by running the same command "
                f"(same NAME and ARGS) with --update-id {update_id}",
                EXIT_TIMEOUT,
            ) from None
        finally:
            await client.close()
    _print(value, as_json)
    return EXIT_OK
