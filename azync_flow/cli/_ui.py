"""`azync-flow ui`: serve the operations console (docs/console.md)."""

from __future__ import annotations

import click

from azync_flow.errors import OtlpConfigError

from ._common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    DbOptions,
    connect,
    db_options,
    example,
    run_async,
)

__all__ = ["ui_command"]

#: Seconds between two backlog samples of ``ui --metrics``.
METRICS_INTERVAL = 15.0


@click.command(
    "ui",
    epilog=example(
        "azync-flow ui",
        "AZYNC_UI_TOKEN=s3cret azync-flow ui --port 8080 "
        "--trace-url 'http://localhost:16686/trace/{trace_id}'",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="Port."
)
@click.option(
    "--token",
    envvar="AZYNC_UI_TOKEN",
    default=None,
    help="Access token that turns actions on (default: $AZYNC_UI_TOKEN; none: read-only).",
)
@click.option(
    "--trace-url",
    default="",
    metavar="TEMPLATE",
    help="Link each execution to its trace: a URL with {trace_id}.",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes of the overview.",
)
@click.option(
    "--metrics",
    is_flag=True,
    help="Also serve /metrics for Prometheus: this process's metrics and the "
    "backlog gauges, sampled every 15 s (extra azync-flow[metrics]).",
)
@db_options
@run_async
async def ui_command(
    host: str,
    port: int,
    token: str | None,
    trace_url: str,
    refresh: float,
    metrics: bool,
    db: DbOptions,
) -> int:
    """Serve the operations console: executions, their timelines, DAG runs,
    schedules, jobs, events and uncertain operations, in a browser. Read-only
    unless started with an access token (--token or $AZYNC_UI_TOKEN); then a
    person signs in with it and their name to act (signal, cancel, terminate,
    suspend, resume, complete, fail, decide, retry, pause, trigger), each action
    confirmed and recorded."""
    try:
        from azync_flow.console import ConsoleSettings, bind, create_app, serve
    except ImportError as exc:
        raise CliError(
            f"the console needs the ui extra ({exc.name} is missing): pip install 'azync-flow[ui]'",
            EXIT_USAGE,
        ) from None
    try:
        settings = ConsoleSettings(
            token=token or None,
            trace_url=trace_url,
            refresh_seconds=refresh,
            metrics_interval=METRICS_INTERVAL if metrics else None,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    async with connect(db) as store:
        await store.check_schema()
        try:
            app = create_app(store, settings)
        except OtlpConfigError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        try:
            sock = bind(host, port)
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}", EXIT_USAGE) from None
        mode = "actions on (sign in with the token)" if token else "read-only (no token)"
        click.echo(
            f"azync-flow console on http://{host}:{port} — {store.target()}; {mode}", err=True
        )
        await serve(app, sock)
    return EXIT_OK
