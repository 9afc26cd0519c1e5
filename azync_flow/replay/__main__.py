"""``python -m azync_flow.replay APP HISTORY...``: ``azync-flow replay`` under its
earlier name (see ``azync-flow replay --help``)."""

from __future__ import annotations

import sys

from azync_flow.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    """Run ``azync-flow replay`` with ``argv``; returns the exit status."""
    return cli_main(["replay", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
