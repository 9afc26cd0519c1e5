"""The event ledger for applications: publish events, run subscribers.

Public surface::

    subscriber            @subscriber("order.placed", name="shipper", retry=RetryPolicy(...))
    attach_subscribers    run subscribers on a Worker (loops, maintenance, retention)
    register_subscribers  record subscriptions without running them (deploy time)
    EventContext          what a subscriber gets next to the payload
    publish_event         the publishing path (Client.publish calls it)

See docs/events.md.
"""

from ._publish import publish_event
from ._subscriber import SubscriberDefinition, subscriber
from ._worker import EventContext, SubscriberBinding, attach_subscribers, register_subscribers

__all__ = [
    "EventContext",
    "SubscriberBinding",
    "SubscriberDefinition",
    "attach_subscribers",
    "publish_event",
    "register_subscribers",
    "subscriber",
]
