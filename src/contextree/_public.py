"""``publish``: each public class and function names the path users import it from.

A package ``__init__`` ends with ``publish(globals())``, as httpx does by hand: the classes
and functions in its ``__all__`` that were defined deeper (``contextree._session.Session``)
get the package as their ``__module__`` (``contextree.Session``), so reprs, errors, pickles
and documentation show the one path to import them from. A name exported by several
namespaces is known by the shortest path (the root's first).

A namespace can also export names lazily, so that importing it stays cheap:
``publish(globals(), lazy={"._session": ("Session",)})`` returns the ``__getattr__`` and
``__dir__`` of PEP 562, which import a name's module the first time the name is used. The
``__module__`` of a lazy name does not wait for that first use: it is set as soon as the
module that defines it has run, however it came to be imported (a module of contextree that
imports ``contextree._session`` directly publishes ``Session`` as ``contextree.Session``
just as ``import contextree; contextree.Session`` does). Importing this module imports
nothing beyond the interpreter's own start-up modules.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    Lazy = Mapping[str, Iterable[str]]
    """A lazy table: module (absolute, or relative to the namespace: ``._session``) -> the
    names the namespace exports from it."""

__all__ = ["publish"]

# The public path of every name a namespace exports lazily, by the module that holds it:
# {module: {name: path}}. A claim is settled (the object's ``__module__`` set) when the
# module has run, or at once when it already has.
_CLAIMS: dict[str, dict[str, str]] = {}
# The lazy tables of the namespaces that have one: {namespace: {name: module}}. A claim on a
# name a lazy namespace only re-exports passes on to the module the name comes from.
_TABLES: dict[str, dict[str, str]] = {}
_SUBMODULE = ""  # the table's entry for a submodule offered as an attribute


def publish(namespace: dict[str, Any], lazy: Lazy | None = None,
            submodules: Iterable[str] = ()) -> tuple[Callable[[str], Any],
                                                      Callable[[], list[str]]]:
    """Set ``__module__`` of what ``namespace`` (a package's ``globals()``) lists in
    ``__all__`` to the package's name, where it was defined in a deeper or private module.

    The names in ``lazy`` are not imported now: they are claimed (published as soon as
    their module has run) and loaded on first use by the returned ``__getattr__``, as are
    the ``submodules`` the namespace offers as attributes (``contextree.compaction``); the
    returned ``__dir__`` lists them with the rest. A namespace without lazy names can ignore
    what it returns."""
    public: str = namespace["__name__"]
    table = _table(public, lazy or {})
    table.update(dict.fromkeys(submodules, _SUBMODULE))
    exported = set(namespace["__all__"])
    if table:
        _TABLES[public] = table
    for name in namespace["__all__"]:
        if name in table:
            if table[name] != _SUBMODULE:
                _claim(table[name], name, public)
            continue
        _settle(namespace[name], _best(_claim_on(namespace[name]), public))

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {public!r} has no attribute {name!r}")
        import importlib

        if source == _SUBMODULE:
            value: Any = importlib.import_module(f"{public}.{name}")
        else:
            value = getattr(importlib.import_module(source), name)
            # Already published when its module ran, unless a loader of another kind ran it;
            # a name the namespace offers without exporting it (not in __all__: an optional
            # extra's) keeps the path its own package gives it.
            if name in exported:
                _settle(value, _best(_claim_on(value), public))
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__


def _table(public: str, lazy: Lazy) -> dict[str, str]:
    """``lazy`` as {name: absolute module}."""
    table: dict[str, str] = {}
    for module, names in lazy.items():
        absolute = public + module if module.startswith(".") else module
        for name in names:
            table[name] = absolute
    return table


def _rank(path: str) -> tuple[int, str]:
    """Shorter paths first (the root's), as ``tests/test_public_surface.py`` chooses."""
    return path.count("."), path


def _best(*paths: str | None) -> str:
    return min((p for p in paths if p), key=_rank)


def _claim_on(obj: Any) -> str | None:
    """The best path claimed for ``obj`` by a namespace that exports it lazily, if any."""
    if not _publishable(obj):
        return None
    return _CLAIMS.get(obj.__module__, {}).get(obj.__name__)


def _claim(module: str, name: str, public: str) -> None:
    """Publish ``module``'s ``name`` as ``public.name`` (unless a shorter path already is
    claimed for it): now if the module has run, else as soon as it has."""
    names = _CLAIMS.setdefault(module, {})
    if name in names and _rank(names[name]) <= _rank(public):
        return
    names[name] = public
    loaded = sys.modules.get(module)
    if loaded is None:
        _watch()
    elif not _initializing(loaded):
        _ran(module)


def _initializing(module: types.ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _ran(module: str) -> None:
    """Settle the claims on ``module``, which has run: its own names get their path, and a
    claim on a name it only offers lazily passes on to the module that name comes from."""
    claims = _CLAIMS.get(module)
    loaded = sys.modules.get(module)
    if not claims or loaded is None:
        return
    values = vars(loaded)
    for name, public in list(claims.items()):
        if name in values:
            _settle(values[name], public)
        elif _TABLES.get(module, {}).get(name, _SUBMODULE) != _SUBMODULE:
            _claim(_TABLES[module][name], name, public)


def _publishable(obj: Any) -> bool:
    return isinstance(obj, type | _FUNCTION)


_FUNCTION = type(_publishable)  # types.FunctionType


def _settle(obj: Any, public: str) -> None:
    """Give ``obj`` (a class or function) ``public`` as ``__module__`` if where it was
    defined is a worse path."""
    if not _publishable(obj):
        return
    module = getattr(obj, "__module__", None) or ""
    if module == public or not _deeper_or_private(module, public):
        return
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
        # What inspect.get_annotations(klass) returns, without importing inspect at start-up.
        own = klass.__dict__.get("__annotations__", {})  # noqa: RUF063
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


# -- knowing when a module has run ------------------------------------------------------------
# Python has no hook for "this module has finished running". A finder first in sys.meta_path
# finds the modules that have a claim with the finders after it and wraps the ``exec_module``
# of their (file) loader, so the claims are settled right after the module's body ran. Every
# other import is looked up in one dict and passed on. A loader of another kind (a zip file,
# a freezer) is left alone, and its names are published on first use through the namespace.

class _Finder:
    """Finds nothing itself: marks the modules that have claims for publishing after they
    run."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _CLAIMS or fullname in sys.modules:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        from importlib.machinery import SourceFileLoader, SourcelessFileLoader

        loader = spec.loader
        if isinstance(loader, SourceFileLoader | SourcelessFileLoader):  # one per module
            loader.exec_module = _publishing(loader.exec_module)  # type: ignore[method-assign,assignment]
        return spec


def _publishing(exec_module: Callable[[types.ModuleType], None]) -> Callable[
        [types.ModuleType], None]:
    def run(module: types.ModuleType) -> None:
        exec_module(module)
        _ran(module.__name__)

    return run


_FINDER = _Finder()


def _watch() -> None:
    # Inserted once and never removed: another thread may be walking sys.meta_path.
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
