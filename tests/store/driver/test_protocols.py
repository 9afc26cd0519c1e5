"""The Postgres driver satisfies every contract Protocol it implements."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

from azync_flow import store as store_pkg
from azync_flow.store import Store, admin, dags, events, leadership, queue, schedules, workflows
from azync_flow.store._common import Subscription
from azync_flow.store.postgres import PostgresStore

DOMAINS = (queue, events, dags, workflows, schedules, leadership, admin)
#: Implemented by objects the store hands out, not by the store itself.
_HANDED_OUT = {
    "DAGTaskTransaction",
    "DeliveryTransaction",
    "LeadershipLease",
    "OperationTransaction",
    "WorkerIdentity",
}
_STORE_PROTOCOLS = [
    Store,
    *(
        getattr(module, name)
        for module in DOMAINS
        for name in module.__all__
        if getattr(getattr(module, name), "_is_protocol", False) and name not in _HANDED_OUT
    ),
]


@pytest.mark.parametrize("protocol", _STORE_PROTOCOLS, ids=lambda p: p.__name__)
async def test_postgres_store_implements_protocol_with_matching_signatures(
    store: PostgresStore, protocol: type
) -> None:
    assert isinstance(store, protocol)
    for name, member in inspect.getmembers(protocol, inspect.isfunction):
        if name.startswith("_"):
            continue
        impl = getattr(PostgresStore, name)
        assert inspect.iscoroutinefunction(impl) == inspect.iscoroutinefunction(member), (
            f"{name} must be async exactly when the protocol's is"
        )
        want = list(inspect.signature(member).parameters)
        got = list(inspect.signature(impl).parameters)
        assert got == want, f"{protocol.__name__}.{name}: {got} != {want}"


async def test_wake_subscription_is_a_subscription(store: PostgresStore) -> None:
    sub = await store.wake()
    assert sub is not None
    async with sub:
        assert isinstance(sub, Subscription)


def test_store_package_exports_config_the_composite_store_and_subscription_only() -> None:
    assert store_pkg.__all__ == ["Config", "Store", "Subscription", "default_channel"]


@pytest.mark.parametrize("module", DOMAINS, ids=lambda m: m.__name__.rpartition(".")[2])
def test_each_domain_module_is_the_one_home_of_the_classes_it_exports(module: ModuleType) -> None:
    exported = module.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    classes = [getattr(module, n) for n in exported if isinstance(getattr(module, n), type)]
    assert [c.__name__ for c in classes if c.__module__ != module.__name__] == []
