"""The `azync-flow` command line (click; see `azync-flow --help` and docs/cli.md).

Commands: `workflows`, `dags`, `jobs`, `events`, `schedules`, `uncertain`, `stats`,
`replay`, `migrate`, `worker`, `ui` (the web console), `embedded`. Every command
that needs the database takes it from
`--dsn` (after the command, else before it), else `$AZYNC_DSN`, else the
embedded server, and its schema from `--schema` (the same way), else
`$AZYNC_SCHEMA`. Output is tables, or JSON with `--json`.
Errors print one line on stderr and exit with a documented status (see
`_common`), never a traceback (`--debug` shows it).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

import click

from azync_flow.errors import (
    AzyncError,
    ConflictError,
    NotFoundError,
    PayloadError,
    StoreDsnError,
    StoreError,
)

from ._common import (
    EXIT_CONFLICT,
    EXIT_INTERNAL,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    dsn_option,
    example,
    schema_option,
)
from ._dags import dags
from ._embedded import embedded
from ._events import events
from ._jobs import jobs
from ._limits import limits
from ._ops import migrate, stats, uncertain
from ._replay import replay_command
from ._schedules import schedules
from ._telemetry import telemetry_from_env
from ._ui import ui_command
from ._worker import worker_command
from ._workflows import workflows

__all__ = ["cli", "main", "run"]


@click.group(
    "azync-flow",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "export AZYNC_DSN=postgresql://localhost/app",
        "azync-flow workflows list --state failed",
        "azync-flow workflows show 3f2a0c9e-...",
    ),
)
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables (any command).")
@dsn_option
@schema_option
def cli(debug: bool, as_json: bool, dsn: str | None, schema: str | None) -> None:
    """Durable execution on PostgreSQL: operate and inspect workflows, DAGs, jobs
    and events. The database is --dsn, else $AZYNC_DSN, else the embedded server."""


for _command in (
    workflows,
    dags,
    jobs,
    events,
    schedules,
    limits,
    uncertain,
    stats,
    replay_command,
    migrate,
    worker_command,
    ui_command,
    embedded,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        telemetry_from_env()  # OTEL_* variables: traces of every command (docs/tracing.md)
        code = cli.main(args=args, prog_name="azync-flow", standalone_mode=False)
        return int(code or 0)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return EXIT_USAGE
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        return _fail(exc.format_message() + hint, EXIT_USAGE, debug)
    except click.ClickException as exc:
        return _fail(exc.format_message(), exc.exit_code, debug)
    except click.Abort:
        return 130
    except CliError as exc:
        return _fail(str(exc), exc.code, debug)
    except NotFoundError as exc:
        return _fail(str(exc), EXIT_NOT_FOUND, debug)
    except ConflictError as exc:
        return _fail(str(exc), EXIT_CONFLICT, debug)
    except StoreDsnError as exc:  # the value given is wrong: bad input, not an outage
        return _fail(str(exc), EXIT_USAGE, debug)
    except StoreError as exc:  # unreachable, login refused, unmigrated (migrate hint)
        return _fail(str(exc), EXIT_UNAVAILABLE, debug)
    except (ValueError, PayloadError) as exc:
        return _fail(str(exc), EXIT_USAGE, debug)
    except TimeoutError as exc:
        return _fail(str(exc) or "timed out", EXIT_TIMEOUT, debug)
    except KeyboardInterrupt:
        return 130
    except (AzyncError, Exception) as exc:
        return _fail(f"unexpected error: {type(exc).__name__}: {exc}", EXIT_INTERNAL, debug)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    first, *rest = message.strip().splitlines() or [""]
    print(f"azync-flow: error: {first}" + (" …" if rest else ""), file=sys.stderr)
    return code


def run() -> None:
    """Console-script entry point (`sys.exit(main())`)."""
    sys.exit(main())
