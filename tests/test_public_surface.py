"""The public surface: a root of user-level names, one namespace per layer, one path per name.

Static checks over every public namespace (a module of contextree with no ``_`` part in its
path, the CLI's own modules aside): it has an ``__all__``, exports no module and no private
name, and every class and function it exports names its public path as ``__module__``, the
root's when the root exports it too; that path really leads to it (pickle finds it there)
and its annotations still resolve (``typing.get_type_hints``, msgspec).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

import contextree as ct

SRC = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) \
    / "src"

BLOCK_EXTRAS = (
    "import sys\n"
    "class _Blocked:\n"
    "    def find_module(self, name, path=None): return None\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('psycopg', 'psycopg_pool', 'openai', 'anthropic',\n"
    "                                  'tiktoken', 'pydantic_ai', 'agents', 'langchain'):\n"
    "            raise ImportError(f'blocked {name}')\n"
    "sys.meta_path.insert(0, _Blocked())\n"
)

ROOT_NAMES = {
    # sessions and messages
    "Session", "TreeNode", "SessionContext", "build_context", "SessionStats", "UsageStats",
    "Message", "ToolCall", "Usage", "TextPart", "ImagePart", "ThinkingPart", "UnknownPart",
    # the agent and its tools
    "agent", "Agent", "TurnResult", "tool", "Tool", "ToolKind", "ToolResult", "Workspace",
    "make_tools",
    # what was sent, sent again
    "replay",
    # keeping the context small, and sessions healthy
    "truncate", "Truncation", "TruncationLimits", "OverflowStore", "repair", "RepairReport",
    # finding what was said, across sessions
    "search", "SearchHit",
    # the two errors a user catches most; the rest are in contextree.errors
    "ContextreeError", "SessionError",
}


def _public_namespaces() -> list[str]:
    """Every public module of contextree by dotted name (from the files, not the imports)."""
    names = []
    for path in sorted((SRC / "contextree").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(p.startswith("_") for p in parts):
            continue
        if parts[:2] == ["contextree", "cli"] and len(parts) > 2:
            continue  # the CLI's modules: its interface is the command line
        names.append(".".join(parts))
    return names


NAMESPACES = _public_namespaces()


def _exports(namespace: str) -> dict[str, Any]:
    module = importlib.import_module(namespace)
    return {name: getattr(module, name) for name in module.__all__}


def _defined_here(obj: Any) -> bool:
    return (isinstance(obj, type) or inspect.isfunction(obj)) and (
        getattr(obj, "__module__", "") or "").split(".")[0] == "contextree"


def _public_path(obj: Any) -> str:
    """The shortest namespace that exports ``obj`` (the root first)."""
    holders = [ns for ns in NAMESPACES if any(v is obj for v in _exports(ns).values())]
    return min(holders, key=lambda ns: (ns.count("."), ns))


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK_EXTRAS + code], capture_output=True,
                          text=True, timeout=60)


# -- the root --------------------------------------------------------------------------------

def test_the_root_exports_the_names_a_user_types_and_nothing_else() -> None:
    assert set(ct.__all__) == ROOT_NAMES
    assert len(ct.__all__) == len(set(ct.__all__))
    errors = [n for n in ct.__all__ if isinstance(getattr(ct, n), type)
              and issubclass(getattr(ct, n), BaseException)]
    assert sorted(errors) == ["ContextreeError", "SessionError"]


def test_the_error_tree_lives_in_errors_not_in_the_root() -> None:
    for name in ct.errors.__all__:
        value = getattr(ct.errors, name)
        if isinstance(value, type) and issubclass(value, ct.ContextreeError) and (
                name not in ROOT_NAMES):
            assert not hasattr(ct, name), f"contextree.{name}: import it from contextree.errors"
    assert ct.SessionError is ct.errors.SessionError


def test_the_layers_are_attributes_of_the_root_but_not_exported() -> None:
    layers = {"compaction", "entries", "errors", "formats", "markers", "models", "redaction",
              "retention", "runtime", "storage", "tokens", "tools", "view"}
    for name in layers:
        assert isinstance(getattr(ct, name), types.ModuleType), name
        assert name not in ct.__all__
    leaked = {n for n, v in vars(ct).items() if isinstance(v, types.ModuleType)
              and not n.startswith("_") and n not in layers | {"cli", "integrations"}}
    assert not leaked, leaked


# -- every public namespace ------------------------------------------------------------------

def test_the_public_namespaces_are_the_expected_ones() -> None:
    assert {"contextree", "contextree.entries", "contextree.storage", "contextree.formats",
            "contextree.storage.postgres", "contextree.integrations.pydantic_ai",
            "contextree.cli"} <= set(NAMESPACES)
    assert not any(part.startswith("_") for ns in NAMESPACES for part in ns.split("."))


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_namespace_declares_all(namespace: str) -> None:
    module = importlib.import_module(namespace)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    declared = [n for n in ast.parse(source).body
                if isinstance(n, ast.Assign | ast.AnnAssign)
                and any(isinstance(t, ast.Name) and t.id == "__all__"
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    assert declared, f"{namespace} has no __all__"
    assert isinstance(module.__all__, list) and len(set(module.__all__)) == len(module.__all__)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_no_namespace_exports_a_module_or_a_private_name(namespace: str) -> None:
    module = importlib.import_module(namespace)
    for name in module.__all__:
        assert not name.startswith("_"), f"{namespace}.{name}"
        assert hasattr(module, name), f"{namespace}.__all__ names {name}, which is not there"
        assert not isinstance(getattr(module, name), types.ModuleType), f"{namespace}.{name}"
    # nor a private module under a public name, in __all__ or not
    aliased = [f"{namespace}.{n} is {v.__name__}" for n, v in vars(module).items()
               if isinstance(v, types.ModuleType) and not n.startswith("_")
               and v.__name__.startswith("contextree")
               and any(p.startswith("_") for p in v.__name__.split("."))]
    assert not aliased, aliased


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_export_names_its_public_path(namespace: str) -> None:
    wrong = []
    for name, obj in _exports(namespace).items():
        if not _defined_here(obj):
            continue
        expected = _public_path(obj)
        if obj.__module__ != expected:
            wrong.append(f"{namespace}.{name}.__module__ is {obj.__module__!r}, "
                         f"not {expected!r}")
        elif getattr(importlib.import_module(expected), obj.__qualname__, None) is not obj:
            wrong.append(f"{expected}.{obj.__qualname__} is not {namespace}.{name}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_exports_pickle_by_their_path_and_their_annotations_resolve(namespace: str) -> None:
    frameworks = {"langchain", "langchain_core", "langgraph", "agents", "pydantic_ai"}
    for name, obj in _exports(namespace).items():
        if not _defined_here(obj):
            continue
        assert pickle.loads(pickle.dumps(obj)) is obj, f"{namespace}.{name}"
        if isinstance(obj, type) and not any(
                k.__module__.split(".")[0] in frameworks for k in obj.__mro__):
            typing.get_type_hints(obj)  # raises if a name cannot be found
            if issubclass(obj, msgspec.Struct):
                msgspec.json.schema(obj)


def test_a_user_sees_public_paths() -> None:
    assert ct.Session.__module__ == "contextree"
    assert repr(ct.Message) == "<class 'contextree.Message'>"
    assert ct.storage.JsonlStorage.__module__ == "contextree.storage"
    assert ct.runtime.SessionTree.__module__ == "contextree.runtime"
    assert ct.compaction.Digest.__module__ == "contextree.compaction"
    assert ct.entries.MessageEntry.__module__ == "contextree.entries"
    assert ct.tools.Tool is ct.Tool and ct.Tool.__module__ == "contextree"
    assert pickle.loads(pickle.dumps(ct.ToolKind.SHELL)) is ct.ToolKind.SHELL
    usage = ct.Usage(input=3, output=4)
    assert pickle.loads(pickle.dumps(usage)) == usage
    message = msgspec.json.decode(b'{"role": "user", "content": "hi"}', type=ct.Message)
    assert message == ct.Message.user("hi")


def test_entries_and_formats_export_only_their_own_names() -> None:
    entries = {}
    exec("from contextree.entries import *", entries)
    assert "os" not in entries and "orjson" not in entries and "msgspec" not in entries
    assert "MessageEntry" in entries and "decode_line" in entries
    assert not hasattr(ct.formats, "claude_code") and not hasattr(ct.formats, "codex_export")
    assert ct.formats.export_to_claude_code_home.__module__ == "contextree.formats"


# -- without the extras ----------------------------------------------------------------------

def test_star_import_works_without_any_extra_twice() -> None:
    done = _run("from contextree import *\nfrom contextree import *\n"
                "from contextree.storage import *\nfrom contextree.runtime import *\n"
                "from contextree.models import *\nfrom contextree.compaction import *\n"
                "from contextree.entries import *\nfrom contextree.formats import *\n"
                "print(Session.__name__, agent.__name__, Session.__module__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Session", "agent", "contextree"]


def test_postgres_without_the_extra_names_it() -> None:
    done = _run("import contextree.storage as s\ntry:\n    s.PostgresStorage\n"
                "except ImportError as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert "contextree[postgres]" in done.stdout
