"""Every public module of the package declares its surface with ``__all__``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _public_modules() -> list[Path]:
    """Modules whose dotted path has no ``_``-private part (``__init__`` counts as public)."""
    return sorted(
        p
        for p in (ROOT / "azync_flow").rglob("*.py")
        if p.name != "__main__.py"
        and not any(
            part.startswith("_") and part != "__init__.py" for part in p.relative_to(ROOT).parts
        )
    )


def _declares_all(path: Path) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in ast.parse(path.read_text()).body
    )


def test_every_public_module_declares_all() -> None:
    missing = [str(p.relative_to(ROOT)) for p in _public_modules() if not _declares_all(p)]
    assert missing == []


def test_the_walk_sees_the_modules_it_should() -> None:
    found = {str(p.relative_to(ROOT)) for p in _public_modules()}
    assert "azync_flow/errors.py" in found
    assert "azync_flow/store/postgres/driver.py" in found
    assert "azync_flow/_text.py" not in found
    assert "azync_flow/worker/_worker.py" not in found
