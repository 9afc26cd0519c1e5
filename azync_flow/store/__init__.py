"""The storage contract: value types and Protocols, plus the Postgres driver.

Its errors are in :mod:`azync_flow.errors`.
"""

from .protocols import *
from .protocols import __all__ as _protocols_all
from .types import *
from .types import __all__ as _types_all

__all__ = sorted([*_protocols_all, *_types_all])
