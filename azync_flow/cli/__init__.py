"""The ``azync-flow`` command line (argparse; see ``azync-flow --help``).

Subcommands: ``migrate``, ``worker APP``, ``workflow start|signal|describe|history|
cancel|terminate|result|list|stalled``, ``replay``, ``uncertain list|resolve``,
``queue stats|dead|retry``.
The database comes from ``--dsn`` or ``$AZYNC_DSN`` (``--schema`` / ``$AZYNC_SCHEMA``
for the schema); only ``migrate`` and ``worker`` fall back to the embedded server
by default, others need ``--embedded`` for that. Errors print one line on stderr
and exit with a documented status (see ``_common``), never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from collections.abc import Sequence

from azync_flow.errors import AzyncError, PayloadError, UnknownWorkflowError
from azync_flow.store.errors import ConflictError, NotFoundError, StoreError

from . import _ops, _worker, _workflow
from ._common import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
)

__all__ = ["CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="azync-flow", description="Durable execution on PostgreSQL: operate and inspect."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _ops.register(sub)
    _worker.register(sub)
    _workflow.register(sub)
    rp = sub.add_parser(
        "replay",
        help="check recorded histories against current workflow code",
        add_help=False,
        prefix_chars="\0",
    )
    rp.add_argument("rest", nargs=argparse.REMAINDER)
    rp.set_defaults(run=None)
    return parser


def _replay(rest: list[str]) -> int:
    from azync_flow.replay.__main__ import main as replay_main

    try:
        return int(replay_main(rest) or 0)
    except (KeyError, UnknownWorkflowError) as exc:
        raise CliError(
            f"a history names workflow {exc}, which the given definitions do not include",
            EXIT_FAILED,
        ) from None
    except (ImportError, AttributeError) as exc:
        raise CliError(f"cannot load the workflow definitions: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    debug = bool(getattr(args, "debug", False))
    try:
        if args.command == "replay":
            return _replay(args.rest)
        return int(asyncio.run(args.run(args)))
    except CliError as exc:
        return _fail(str(exc), exc.code, debug)
    except NotFoundError as exc:
        return _fail(str(exc), EXIT_NOT_FOUND, debug)
    except ConflictError as exc:
        return _fail(str(exc), EXIT_CONFLICT, debug)
    except StoreError as exc:  # unreachable, unmigrated (with the migrate hint), bad DSN
        return _fail(str(exc), EXIT_UNAVAILABLE, debug)
    except (ValueError, PayloadError) as exc:
        return _fail(str(exc), EXIT_USAGE, debug)
    except TimeoutError as exc:
        return _fail(str(exc) or "timed out", EXIT_TIMEOUT, debug)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # replay's own usage errors
        code = exc.code
        if isinstance(code, str):
            return _fail(code, EXIT_USAGE, debug)
        return int(code or 0)
    except (AzyncError, Exception) as exc:
        return _fail(f"unexpected error: {type(exc).__name__}: {exc}", EXIT_INTERNAL, debug)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"azync-flow: error: {message}", file=sys.stderr)
    return code


def run() -> None:
    """Console-script entry point (``sys.exit(main())``)."""
    sys.exit(main())
