"""tests/store holds one conformance suite per domain of the contract, and the
check each suite runs names the verbs its package never calls."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import azync_flow.store
from tests.store.contract_coverage import contract_verbs, uncovered_verbs

HERE = Path(__file__).parent


def test_each_contract_module_has_a_suite_that_checks_its_coverage() -> None:
    """Every public module of ``azync_flow.store`` that declares a role is a domain."""
    domains = []
    for info in pkgutil.iter_modules(azync_flow.store.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        if contract_verbs(importlib.import_module(f"azync_flow.store.{info.name}")):
            domains.append(info.name)
    seven = {"admin", "dags", "events", "leadership", "queue", "schedules", "workflows"}
    assert set(domains) >= seven
    for domain in domains:
        check = HERE / domain / "test_contract.py"
        assert check.is_file(), f"no conformance suite tests/store/{domain}/"
        source = check.read_text()
        assert "def test_suite_covers_the_contract" in source, domain
        assert f"uncovered_verbs({domain}," in source, domain


FAKE_CONTRACT = """
from typing import Protocol

from azync_flow.store.queue import QueueProducer


class Reader(Protocol):
    async def read(self) -> int: ...

    def now(self) -> int: ...

    def _private(self) -> None: ...


class Writer(Reader, QueueProducer, Protocol):
    async def write(self) -> None: ...


class NotARole:
    def helper(self) -> None: ...
"""


def _fake_contract() -> ModuleType:
    module = ModuleType("fake_contract")
    exec(FAKE_CONTRACT, module.__dict__)
    return module


def test_the_verbs_are_the_public_methods_the_module_s_own_protocols_declare() -> None:
    # not another module's role (QueueProducer), not a class that is no Protocol
    assert contract_verbs(_fake_contract()) == {
        "read": ["Reader"],
        "now": ["Reader"],
        "write": ["Writer"],
    }


def test_a_verb_no_test_calls_is_named_with_its_protocol(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_x.py").write_text(
        "async def test_x(store):\n"
        "    await store.read()\n"
        "    write = store.write  # referenced, never called\n"
    )
    assert uncovered_verbs(_fake_contract(), tmp_path) == ["Reader.now", "Writer.write"]
    (tmp_path / "test_y.py").write_text("def test_y(store):\n    store.now()\n    store.write()\n")
    assert uncovered_verbs(_fake_contract(), tmp_path) == []
