"""The console ships whole: every template and static file it serves is
matched by the package data of pyproject.toml (so the wheel carries it), and
the page assets are the package's own (no network needed)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "azync_flow" / "console"


def test_every_template_and_static_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["azync_flow"]
    files = [
        p.relative_to(ROOT / "azync_flow").as_posix()
        for folder in ("templates", "static")
        for p in (CONSOLE / folder).iterdir()
    ]
    assert files
    assert [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)] == []


def test_the_pages_load_nothing_from_another_host() -> None:
    for template in (CONSOLE / "templates").glob("*.html"):
        text = template.read_text()
        for attr in ('src="http', "src='http", 'href="http', "@import"):
            assert attr not in text, f"{template.name} loads {attr}…"
    assert (CONSOLE / "static" / "htmx.min.js").stat().st_size > 10_000


def test_ui_refuses_a_trace_url_without_the_trace_id(capsys: pytest.CaptureFixture[str]) -> None:
    from azync_flow.cli import main

    assert main(["ui", "--trace-url", "http://jaeger/trace/"]) == 2
    assert "{trace_id}" in capsys.readouterr().err
