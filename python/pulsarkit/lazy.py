"""A package's re-exported names imported on first use (PEP 562).

A subpackage's ``__init__`` re-exports its modules' names for users, but the read path imports single
modules (``managed_ledger.position``, ``broker.topic_name``): an eager ``__init__`` would load the whole
subpackage with them (the bookie GC, the broker's topic and dedup: ~10 ms of a command's start) and made
import cycles between the layers. Each ``__init__`` keeps its ``TYPE_CHECKING`` imports for type checkers and
gives the same names here (tests/test_imports.py checks the two agree).

:func:`deferred`: a module imported when one of its names is first used (``pyarrow.compute``: ~30 ms of every
command's start, yet no message read calls it unless an entry needs more than the native assembly).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any


def exports(package: str, modules: dict[str, Iterable[str]]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``modules[m]`` is taken from its module
    ``m`` (relative to the package) when first asked for, then kept in the package's namespace. A name
    written ``"name as alias"`` is exported as ``alias``. Any other name of a module of the package
    (``bookkeeper.entrylog``) imports that module, as the eager ``__init__`` had."""
    where: dict[str, tuple[str, str]] = {}
    for module, names in modules.items():
        for n in names:
            name, _, alias = n.partition(" as ")
            where[alias or name] = (module, name)

    def __getattr__(name: str) -> object:
        if name in where:
            module, attr = where[name]
            value = getattr(importlib.import_module(module, package), attr)
        elif name.isidentifier() and not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later accesses skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where) | submodules(sys.modules[package].__path__))

    return __getattr__, __dir__


def submodules(path: Iterable[str]) -> set[str]:
    """The public modules and subpackages on disk (``os``, not ``pkgutil``: cheaper to import)."""
    names = set()
    for d in path:
        for n in os.listdir(d):
            if n.endswith(".py") or os.path.isfile(os.path.join(d, n, "__init__.py")):
                names.add(n.removesuffix(".py"))
    return {n for n in names if not n.startswith("_")}


class DeferredModule:
    """Module ``name`` imported at the first use of one of its attributes, each then kept here (later uses
    skip ``__getattr__``). ``importlib`` serialises the import itself, so threads may race to the first use."""

    def __init__(self, name: str) -> None:
        self.__name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy, pickle and introspection probe dunders: not a use
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self.__name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<deferred module {self.__name!r}>"


def deferred(name: str) -> Any:
    """``name`` (an absolute module name) as a :class:`DeferredModule`: ``pc = deferred("pyarrow.compute")``."""
    return DeferredModule(name)
