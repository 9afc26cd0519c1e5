"""Every ```python block in README.md and docs/*.md compiles, and every name the
docs import from the package is where they say, so the docs cannot rot silently.
Compile only (no execution): fragments may use names defined elsewhere on the
page, and top-level ``await`` / ``async with`` is allowed as in a REPL."""

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


#: ``from azync_flow... import ...`` in prose (inline code) as well as in blocks.
INLINE_IMPORT = re.compile(r"`(from azync_flow[\w.]* import [\w, ]+)`")


def doc_imports() -> list[tuple[str, str, str]]:
    """(``file``, module, name) of every name the docs import from the package."""
    found = []
    for doc in DOCS:
        where = str(doc.relative_to(ROOT))
        text = doc.read_text()
        sources = [textwrap.dedent(m.group(2)) for m in BLOCK.finditer(text)]
        sources += [m.group(1) for m in INLINE_IMPORT.finditer(text)]
        for source in sources:
            flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            tree = compile(source, where, "exec", flags=flags, dont_inherit=True)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "azync_flow"
                ):
                    found += [(where, node.module or "", a.name) for a in node.names]
    return sorted(set(found))


def test_every_name_the_docs_import_exists_where_they_say() -> None:
    import importlib

    missing = [
        f"{where}: from {module} import {name}"
        for where, module, name in doc_imports()
        if not hasattr(importlib.import_module(module), name)
    ]
    assert len(doc_imports()) > 30
    assert missing == []
