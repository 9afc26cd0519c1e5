"""`azync-flow replay APP HISTORY...`: check recorded histories against current code."""

from __future__ import annotations

from typing import Any

import click

from azync_flow.errors import HistoryFileError
from azync_flow.replay.replayer import Replayer

from ._apps import app_parts, load_app
from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, example
from ._output import emit, json_option

_HINT = "save a replayable history with `azync-flow workflows export ID > run.json`"


@click.command(
    "replay",
    epilog=example(
        "azync-flow workflows export 3f2a0c9e-... > run.json",
        "azync-flow replay myapp.workflows run.json",
    ),
)
@click.argument("app", metavar="APP")
@click.argument("histories", metavar="HISTORY...", nargs=-1, required=True)
@json_option
def replay_command(app: str, histories: tuple[str, ...], as_json: bool) -> int:
    """Replay each HISTORY file (written by `workflows export`) against the
    workflows of APP (`module` or `module:attr`, imported from the current
    directory as `python -m` would): `ok` when the code still makes the
    recorded decisions, `FAIL` with the first difference otherwise. Exits 0
    when every history replays cleanly, 1 on a mismatch, 2 when a file cannot
    be read or is not an exported history, or APP lacks its workflow. Needs
    no database."""
    workflows = app_parts(load_app(app))[0]
    if not workflows:
        raise CliError(f"{app!r} provides no @workflow definitions")
    replayer = Replayer(workflows)
    verdicts: list[dict[str, Any]] = []
    unreadable: list[str] = []  # bad input: exit 2 once every readable file is replayed
    for path in histories:
        try:
            result = replayer.replay(path)
        except HistoryFileError as err:
            unreadable.append(f"malformed history {err.source}: {err.problem}; {_HINT}")
            verdicts.append({"file": path, "verdict": "error", "error": unreadable[-1]})
            continue
        except OSError as err:
            unreadable.append(f"cannot read {path!r}: {err.strerror or err}")
            verdicts.append({"file": path, "verdict": "error", "error": unreadable[-1]})
            continue
        except KeyError as exc:
            raise CliError(
                f"{path}: the history names workflow {exc}, which {app!r} does not define",
                EXIT_USAGE,
            ) from None
        error = None if result.ok else str(result.error)
        verdicts.append({"file": path, "verdict": "ok" if result.ok else "fail", "error": error})
    if as_json:
        emit(verdicts)
    else:
        for v in verdicts:
            if v["verdict"] != "error":
                tail = f": {v['error']}" if v["error"] else ""
                click.echo(f"{'ok   ' if v['verdict'] == 'ok' else 'FAIL '} {v['file']}{tail}")
    if unreadable:
        more = (
            f" (and {len(unreadable) - 1} more unreadable file(s))" if len(unreadable) > 1 else ""
        )
        raise CliError(unreadable[0] + more, EXIT_USAGE)
    return EXIT_FAILED if any(v["verdict"] != "ok" for v in verdicts) else EXIT_OK
