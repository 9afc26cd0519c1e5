"""The API reference build (scripts/api_reference.py) fails on what pdoc warns about."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "api_reference.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_reference", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return name


def test_a_clean_module_builds_with_exit_status_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _module(
        tmp_path, monkeypatch, "clean_mod",
        '"""A module."""\n\ndef f(x: int) -> int:\n    """Double ``x``."""\n    return 2 * x\n',
    )  # fmt: skip
    out = tmp_path / "out"
    assert _script().main(["-o", str(out), name]) == 0
    assert (out / "clean_mod.html").exists()


def test_an_annotation_pdoc_cannot_resolve_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _module(
        tmp_path, monkeypatch, "broken_mod",
        '"""A module."""\n\ndef f(x: "NoSuchType") -> None:\n    """Take ``x``."""\n',
    )  # fmt: skip
    assert _script().main(["-o", str(tmp_path / "out"), name]) == 1
    assert "NoSuchType" in capsys.readouterr().err
