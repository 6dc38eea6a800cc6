"""``publish``: each public class and function names the path users import it from.

A package ``__init__`` ends with ``publish(globals())``, as httpx does by hand: the classes
and functions in its ``__all__`` that were defined deeper (``contextree._session.Session``)
get the package as their ``__module__`` (``contextree.Session``), so reprs, errors, pickles
and documentation show the one path to import them from. The root package publishes last,
so a name it re-exports is known by its shortest path.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

__all__ = ["publish"]


def publish(namespace: dict[str, Any]) -> None:
    """Set ``__module__`` of what ``namespace`` (a package's ``globals()``) lists in
    ``__all__`` to the package's name, where it was defined in a deeper or private module."""
    public: str = namespace["__name__"]
    for name in namespace["__all__"]:
        obj = namespace[name]
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            continue
        module = getattr(obj, "__module__", None) or ""
        if module == public or not _deeper_or_private(module, public):
            continue
        if isinstance(obj, type):
            _resolve_annotations(obj)
        obj.__module__ = public


def _deeper_or_private(module: str, public: str) -> bool:
    """Whether ``module`` (where an object was defined) is a worse path than ``public``:
    inside it, or a contextree module with a private part."""
    if module.startswith(public + "."):
        return True
    parts = module.split(".")
    return parts[0] == "contextree" and any(p.startswith("_") for p in parts)


def _resolve_annotations(cls: type) -> None:
    """Evaluate the postponed annotations of ``cls`` and its bases in the modules that wrote
    them: ``typing.get_type_hints`` and msgspec look names up in the module ``__module__``
    names, which will not hold them. A name that cannot be resolved there either (one
    imported only for type checking) stays a string."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("contextree"):
            continue  # a base from another library: not ours to change
        own = inspect.get_annotations(klass)
        if not any(isinstance(v, str) for v in own.values()):
            continue
        home = sys.modules.get(klass.__module__)
        globalns = dict(vars(home)) if home is not None else {}
        localns = dict(vars(klass))
        resolved = {}
        for key, value in own.items():
            if isinstance(value, str):
                try:
                    value = eval(value, globalns, localns)  # what get_type_hints does
                except Exception:
                    pass
            resolved[key] = value
        klass.__annotations__ = resolved
