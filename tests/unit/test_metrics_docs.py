"""docs/metrics.md documents exactly the instruments azync_flow records: each
one's name, Prometheus name, type, unit and attributes, as the catalogue says."""

from __future__ import annotations

import re
from pathlib import Path

from azync_flow._metrics import CATALOGUE, MetricInfo

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(azync_flow\.[\w.]+)` \| `(\w+)` \| (\w+) \| `([^`]+)` \| ([^|]+) \|", re.M)


def prometheus_name(m: MetricInfo) -> str:
    name = m.name.replace(".", "_") + ("_seconds" if m.unit == "s" else "")
    return name + ("_total" if m.type == "counter" else "")


def test_the_metrics_table_lists_every_instrument_with_its_type_unit_and_attributes() -> None:
    rows = {
        name: (prom, kind, unit, tuple(re.findall(r"`([\w.]+)`", attrs)))
        for name, prom, kind, unit, attrs in ROW.findall(DOC.read_text())
    }
    expected = {m.name: (prometheus_name(m), m.type, m.unit, m.attributes) for m in CATALOGUE}
    assert rows == expected


def test_every_instrument_name_is_unique_and_namespaced() -> None:
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names))
    assert all(n.startswith("azync_flow.") for n in names)
    assert {m.type for m in CATALOGUE} == {"counter", "histogram", "gauge"}
    assert all(m.unit == "s" for m in CATALOGUE if m.type == "histogram")
