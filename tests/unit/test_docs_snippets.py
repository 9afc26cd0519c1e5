"""Every ```python block in README.md and docs/*.md compiles, so the docs cannot rot
silently. Compile only (no execution): fragments may use names defined elsewhere on
the page, and top-level ``await`` / ``async with`` is allowed as in a REPL."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: An opening fence (any indent, e.g. inside a list item), its body, the closing fence.
BLOCK = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[tuple[str, str]]:
    """(``file:line``, dedented source) of every python block."""
    blocks = []
    for doc in DOCS:
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start(2)) + 1
            blocks.append((f"{doc.relative_to(ROOT)}:{line}", textwrap.dedent(match.group(2))))
    return blocks


BLOCKS = python_blocks()


def test_docs_have_python_blocks_to_check() -> None:
    files = {where.split(":")[0] for where, _ in BLOCKS}
    assert {"docs/workflows.md", "docs/dags.md", "docs/queue.md"} <= files, files


@pytest.mark.parametrize(("where", "source"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_python_block_compiles(where: str, source: str) -> None:
    try:
        compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as err:
        pytest.fail(f"{where}: python block does not compile: {err}")
