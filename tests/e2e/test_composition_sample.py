"""The composition sample runs as users run it: the order with its payment and
shipping children (paid and shipped, or declined by the payment child) and the
subscription that continues as new each billing period."""

from __future__ import annotations

from .test_workflow_samples import run_sample, sample_schema  # noqa: F401


async def test_composition_sample_ships_the_order_and_renews_the_subscription(
    pg_dsn: str,
    sample_schema: str,  # noqa: F811
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "composition.py")
    assert " shipped" in out
    assert "child    order_payment   succeeded" in out
    assert "child    order_shipping  succeeded" in out
    assert "subscription: ended after 3 periods" in out
    assert "run 3 " in out


async def test_composition_sample_declines_when_the_payment_child_fails(
    pg_dsn: str,
    sample_schema: str,  # noqa: F811
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "composition.py", "--decline")
    assert "declined (ActivityError" in out
    assert "card ending 0000 declined" in out
    assert "child    order_payment   failed" in out
    assert "order_shipping" not in out
