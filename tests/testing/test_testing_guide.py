"""docs/testing.md's first test runs green as the guide tells a new user to run it:
its pyproject settings, samples/order.py copied into tests/, plain ``pytest``."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "testing.md").read_text()


def block_after(marker: str, language: str) -> str:
    """The first ``language`` fenced block after ``marker`` in the guide."""
    start = GUIDE.index(marker)
    match = re.compile(rf"^```{language}\n(.*?)^```$", re.M | re.S).search(GUIDE, start)
    assert match is not None, f"no {language} block after {marker!r}"
    return match.group(1)


async def test_the_guides_first_test_passes_as_written(tmp_path: Path, pg_dsn: str) -> None:
    (tmp_path / "pyproject.toml").write_text(block_after("in `pyproject.toml`", "toml"))
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "samples" / "order.py", tests / "order.py")
    (tests / "test_order.py").write_text(block_after("`tests/test_order.py`", "python"))
    env = {**os.environ, "AZYNC_TEST_DSN": pg_dsn, "PYTHONPATH": str(ROOT)}
    # -p loads the plugin as the installed package's pytest11 entry point does
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "azync_flow.testing.pytest_plugin",
        "-p",
        "no:cacheprovider",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    assert re.search(r"\b3 passed\b", out.decode()), out.decode()
