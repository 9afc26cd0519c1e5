"""Every chaos test is `slow` (kills processes, waits out leases): the quick loop
`pytest -m "not slow"` leaves them to CI, which runs everything."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The hook sees the whole session's items: mark only those in this folder.
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.slow)
