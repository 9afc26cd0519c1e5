"""Whether a conformance package calls every verb of its domain's contract.

The verbs are read from the contract module itself (every public method of
every Protocol class it defines), never from a list kept by hand, so a verb
added to a role is reported until a test of the package calls it. A call is
an attribute call ``.verb(`` anywhere in the package's test sources (helpers
shared between packages do not count: each suite calls its verbs itself).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

__all__ = ["attribute_calls", "contract_verbs", "uncovered_verbs"]


def contract_verbs(contract: ModuleType) -> dict[str, list[str]]:
    """Every public method of the Protocol classes ``contract`` defines, each with
    the names of the Protocols declaring it (a verb a role inherits from another
    module's role belongs to that module)."""
    verbs: dict[str, list[str]] = {}
    for cls in vars(contract).values():
        if not (inspect.isclass(cls) and getattr(cls, "_is_protocol", False)):
            continue
        if cls.__module__ != contract.__name__:
            continue
        for name, member in vars(cls).items():
            if not name.startswith("_") and inspect.isfunction(member):
                verbs.setdefault(name, []).append(cls.__name__)
    return verbs


def attribute_calls(package: Path) -> set[str]:
    """The attribute names called (``x.name(...)``) in the ``.py`` files under ``package``."""
    called: set[str] = set()
    for source in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called.add(node.func.attr)
    return called


def uncovered_verbs(contract: ModuleType, package: Path) -> list[str]:
    """``Protocol.verb`` of each verb of ``contract`` no source under ``package`` calls, sorted."""
    called = attribute_calls(package)
    return sorted(
        f"{role}.{verb}"
        for verb, roles in contract_verbs(contract).items()
        if verb not in called
        for role in roles
    )
