"""Base layer: a package's names loaded on first use (PEP 562's module ``__getattr__``).

A hook call or a snapshot is a new process, and what it imports is much of its cost:
``takeback.model`` and ``takeback.ops`` name more than any one command uses, and each
loads the module that holds a name when the name is first asked for. (``takeback``
itself has a loader of its own: every process loads it, and this module would be one
more file to read for a hook call.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def loader(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a ``__getattr__`` for ``package`` that imports ``where[name]`` on first use.

    Args:
        package: the package's ``__name__``.
        where: each name -> the module, relative to ``package``, that holds it.
    """

    def __getattr__(name: str) -> Any:
        import importlib

        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        vars(importlib.import_module(package))[name] = value  # asked once
        return value

    return __getattr__
