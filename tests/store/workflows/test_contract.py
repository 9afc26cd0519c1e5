"""The workflows suite calls every verb of the contract module ``azync_flow.store.workflows``."""

from __future__ import annotations

from pathlib import Path

from azync_flow.store import workflows
from tests.store.contract_coverage import uncovered_verbs


def test_suite_covers_the_contract() -> None:
    missing = uncovered_verbs(workflows, Path(__file__).parent)
    assert not missing, f"no test of tests/store/workflows calls: {', '.join(missing)}"
