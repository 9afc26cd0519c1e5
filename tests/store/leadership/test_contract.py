"""The leadership suite calls every verb of the contract module ``azync_flow.store.leadership``."""

from __future__ import annotations

import re
from pathlib import Path

from azync_flow.store import leadership
from tests.store.contract_coverage import uncovered_verbs


def test_suite_covers_the_contract() -> None:
    missing = uncovered_verbs(leadership, Path(__file__).parent)
    assert not missing, f"no test of tests/store/leadership calls: {', '.join(missing)}"


def test_each_acquire_leadership_clause_the_docs_map_names_a_test_of_this_suite() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "operations.md").read_text()
    section = docs.split("### The contract's AcquireLeadership")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`test_" in line]
    assert len(rows) == 5  # one per clause
    defined = {
        name
        for source in Path(__file__).parent.glob("test_*.py")
        for name in re.findall(r"^(?:async )?def (test_\w+)", source.read_text(), re.M)
    }
    for row in rows:
        cited = re.findall(r"`(test_\w+)`", row)
        assert cited, row
        assert set(cited) <= defined, set(cited) - defined
