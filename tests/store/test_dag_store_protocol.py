"""The Postgres driver satisfies the DAGStore and TxDAGStore contract Protocols."""

from __future__ import annotations

import inspect

import pytest

from azync_flow.store import DAGStore, TxDAGStore
from azync_flow.store.postgres import PostgresStore


@pytest.mark.parametrize("protocol", [DAGStore, TxDAGStore])
def test_postgres_store_implements_dag_protocols(protocol: type) -> None:
    for name, member in inspect.getmembers(protocol, inspect.isfunction):
        if name.startswith("_"):
            continue
        impl = getattr(PostgresStore, name)
        assert inspect.iscoroutinefunction(impl), f"{name} must be async"
        want = list(inspect.signature(member).parameters)
        params = inspect.signature(impl).parameters
        got = list(params)
        # the contract's parameters, in order; extensions only as keyword-only
        # arguments with defaults (promote_unblocked/complete_dags take since=)
        assert got[: len(want)] == want, f"{protocol.__name__}.{name}: {got} != {want}"
        for extra in got[len(want) :]:
            p = params[extra]
            assert p.kind is p.KEYWORD_ONLY, f"{name}: {extra} must be keyword-only"
            assert p.default is not p.empty, f"{name}: {extra} needs a default"


async def test_store_instance_is_a_dag_store(store: PostgresStore) -> None:
    assert isinstance(store, DAGStore)
    assert isinstance(store, TxDAGStore)
