"""Build the HTML API reference from the docstrings with pdoc.

Usage::

    python scripts/api_reference.py              # azync_flow -> build/api/
    python scripts/api_reference.py -o DIR MOD   # other modules / output folder

Exit status: 0 when pdoc built the pages without a warning, 1 when it warned
(an unresolvable annotation, a broken docstring, a module that fails to
import); every warning is printed to stderr first.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "build" / "api"


def build(modules: Sequence[str], output: Path) -> list[str]:
    """Render ``modules`` (import names) into ``output``.

    Args:
        modules: modules to document; their public submodules come along.
        output: folder for the HTML pages (created as needed).

    Returns:
        The text of every warning pdoc raised, empty when the build is clean.
    """
    import pdoc

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*modules, output_directory=output)
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 clean, 1 warnings)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("modules", nargs="*", default=["azync_flow"])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    problems = build(args.modules, args.output)
    for problem in problems:
        print(f"api_reference: {problem}", file=sys.stderr)
    if problems:
        print(f"api_reference: {len(problems)} warning(s); fix them", file=sys.stderr)
        return 1
    print(f"api_reference: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
