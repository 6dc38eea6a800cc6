"""Every public class, function, method and property has a docstring (help() is the manual)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator

PUBLIC = ["contextree", "contextree.entries", "contextree.storage", "contextree.compaction",
          "contextree.runtime", "contextree.tools", "contextree.models", "contextree.formats",
          "contextree.markers", "contextree.tokens", "contextree.errors"]


def public_callables() -> Iterator[tuple[str, object]]:
    seen: set[int] = set()
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if obj is None or inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj
            elif inspect.isclass(obj):
                yield f"{module_name}.{name}", obj
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(value, property):
                        value = value.fget
                    elif isinstance(value, classmethod | staticmethod):
                        value = value.__func__
                    if inspect.isfunction(value):
                        yield f"{module_name}.{name}.{attr}", value


def test_every_public_callable_has_a_docstring() -> None:
    missing = [name for name, obj in public_callables() if not (obj.__doc__ or "").strip()]
    assert not missing, f"{len(missing)} public callables without a docstring: {missing}"
