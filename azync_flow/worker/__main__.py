"""``python -m azync_flow.worker APP [options]``: ``azync-flow worker`` under its
earlier name (see ``azync-flow worker --help``)."""

from __future__ import annotations

import sys

from azync_flow.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    """Run ``azync-flow worker`` with ``argv``; returns the exit status."""
    return cli_main(["worker", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
