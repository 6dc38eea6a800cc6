"""The public surface: a root of user-level names, one namespace per layer, no extras needed."""

from __future__ import annotations

import subprocess
import sys
import types

import contextree as ct

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


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK_EXTRAS + code], capture_output=True,
                          text=True, timeout=60)


def test_star_import_works_without_any_extra_twice() -> None:
    done = _run("from contextree import *\nfrom contextree import *\n"
                "from contextree.storage import *\nfrom contextree.runtime import *\n"
                "from contextree.models import *\nfrom contextree.compaction import *\n"
                "print(Session.__name__, agent.__name__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Session", "agent"]


def test_postgres_without_the_extra_names_it() -> None:
    done = _run("import contextree.storage as s\ntry:\n    s.PostgresStorage\n"
                "except ImportError as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert "contextree[postgres]" in done.stdout


def test_root_holds_user_level_names_and_no_implementation_module() -> None:
    public_modules = {"compaction", "entries", "errors", "formats", "markers", "models",
                      "runtime", "storage", "tokens", "tools"}
    for name in ct.__all__:
        value = getattr(ct, name)
        if isinstance(value, types.ModuleType):
            assert name in public_modules, name
    leaked = {n for n, v in vars(ct).items() if isinstance(v, types.ModuleType)
              and not n.startswith("_") and n not in public_modules | {"cli", "integrations"}}
    assert not leaked, leaked
    everyday = [n for n in ct.__all__ if not isinstance(getattr(ct, n), types.ModuleType)
                and not (isinstance(getattr(ct, n), type)
                         and issubclass(getattr(ct, n), ct.ContextreeError))]
    assert len(everyday) <= 32, everyday


def test_each_layer_has_one_public_path() -> None:
    assert ct.entries.MessageEntry.__module__ == "contextree.entries"
    assert ct.runtime.SessionTree.__module__.startswith("contextree.runtime._")
    assert ct.storage.JsonlStorage.__module__.startswith("contextree.storage._")
    assert ct.compaction.Digest.__module__.startswith("contextree.compaction._")
    assert ct.Session.__module__ == "contextree._session"
