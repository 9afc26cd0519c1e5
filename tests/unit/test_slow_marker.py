"""`pytest -m "not slow"` (the quick loop in CONTRIBUTING.md) leaves out exactly
the chaos tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(marker: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker, "tests/chaos", "tests/unit/test_replay_history_file.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_chaos_tests_are_slow_and_nothing_else_is() -> None:
    quick = _collected("not slow")
    slow = _collected("slow")
    assert quick
    assert all(i.startswith("tests/unit/") for i in quick)
    assert slow
    assert all(i.startswith("tests/chaos/") for i in slow)
