"""Check recorded histories against current workflow code.

    python -m azync_flow.replay myapp.workflows:order history1.json [history2.json ...]

Each ``module:attribute`` names a ``@workflow`` definition (or a list of them, or
a ``Registry``). Exits 0 when every history replays cleanly, 1 otherwise,
printing one verdict line per file.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from azync_flow.replay.replayer import HistoryFileError, Replayer


def _load(spec: str) -> list[Any]:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"expected module:attribute, got {spec!r}")
    target = getattr(importlib.import_module(module_name), attr)
    if hasattr(target, "workflows") and isinstance(target.workflows, dict):
        return list(target.workflows.values())
    return list(target) if isinstance(target, (list, tuple)) else [target]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m azync_flow.replay", description=__doc__)
    parser.add_argument("workflows", help="module:attribute of the workflow definition(s)")
    parser.add_argument("histories", nargs="+", help="history JSON files")
    args = parser.parse_args(argv)
    replayer = Replayer(_load(args.workflows))
    failed = 0
    for path in args.histories:
        try:
            result = replayer.replay(path)
        except (HistoryFileError, OSError) as err:
            failed += 1
            print(f"ERROR {path}: {err}")
            continue
        if result.ok:
            print(f"ok    {path}")
        else:
            failed += 1
            print(f"FAIL  {path}: {result.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
