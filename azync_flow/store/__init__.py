"""The storage contract: value types, errors and Protocols, plus the Postgres driver."""

from .errors import *
from .errors import __all__ as _errors_all
from .protocols import *
from .protocols import __all__ as _protocols_all
from .types import *
from .types import __all__ as _types_all

__all__ = sorted([*_errors_all, *_protocols_all, *_types_all])
