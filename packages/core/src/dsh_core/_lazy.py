"""Names a package imports on first use (PEP 562), and deprecated aliases that warn.

A package whose ``__init__`` must stay cheap (a pytest plugin loaded in every run, an agent
that replays without the HTTP client) lists where each name lives; :func:`lazy_exports` returns
the module's ``__getattr__`` and ``__dir__``. One implementation instead of a table and a
``__getattr__`` copied into each package.

This module imports nothing of dsh: ``dsh_core/__init__`` may use it too.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Deprecated", "lazy_exports"]


@dataclass(frozen=True, slots=True)
class Deprecated:
    """An old public name kept as an alias.

    Attributes:
        home: the module the new name lives in (absolute, or relative to the package: ``._x``).
        name: the new name there.
        removal: the version that removes the alias (the CHANGELOG says so too).
    """

    home: str
    name: str
    removal: str


def _absolute(package: str, home: str) -> str:
    return f"{package}{home}" if home.startswith(".") else home


def lazy_exports(
    package: str,
    homes: Mapping[str, str],
    deprecated: Mapping[str, Deprecated] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the module's ``__name__``.
        homes: public name -> the module that defines it (absolute, or ``._private`` relative
            to ``package``); imported on the first lookup, then kept as a plain attribute.
        deprecated: old name -> :class:`Deprecated`; every lookup warns (DeprecationWarning)
            and returns the new name's value, never cached, so each use is seen.

    Returns:
        ``(__getattr__, __dir__)``, to assign at module level.
    """
    old_names = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        alias = old_names.get(name)
        if alias is not None:
            warnings.warn(
                f"{package}.{name} is deprecated, use {package}.{alias.name} "
                f"(removal in {alias.removal})",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(_absolute(package, alias.home)), alias.name)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_absolute(package, home)), name)
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        module = sys.modules[package]
        return sorted({*vars(module), *getattr(module, "__all__", ()), *homes})

    return __getattr__, __dir__
