"""The event ledger for applications: publish events, run subscribers.

Public surface::

    subscriber            @subscriber("order.placed", name="shipper", retry=RetryPolicy(...))
    register_subscribers  record subscriptions without running them (deploy time)
    EventContext          what a subscriber gets next to the payload
    SubscriberBinding     the subscribers of one worker (``attach_subscribers`` builds it)

Publishing is ``Client.publish`` (``ctx.publish`` from a subscriber,
``current_activity().publish`` from an activity). See docs/events.md.
"""

from ._subscriber import SubscriberDefinition, subscriber
from ._worker import EventContext, SubscriberBinding, register_subscribers

__all__ = [
    "EventContext",
    "SubscriberBinding",
    "SubscriberDefinition",
    "register_subscribers",
    "subscriber",
]
