"""Start-up stays cheap: ``import contextree`` and the short commands import only what they need.

Each check runs a fresh interpreter and looks at ``sys.modules`` afterwards: what must not be
there, never how long it took (bench/bench_startup.py measures the time). The lazy names
still resolve, to the same objects, with their public ``__module__`` however they are first
reached, and the tables the lazy namespaces load from agree with what type checkers see.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import contextree as ct

SRC = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) \
    / "src"

# Modules nobody pays for before using them: the heavy layers, the CLI, and the libraries
# they bring (rich and typer for the CLI, the SDKs, tokenizers, pydantic).
HEAVY_LIBRARIES = ["rich", "typer", "httpx", "openai", "anthropic", "tiktoken", "tokenizers",
                   "pydantic", "platformdirs", "asyncio", "psycopg", "importlib.metadata"]
NOT_AT_IMPORT = [
    "contextree.compaction", "contextree.compaction._digest", "contextree.formats",
    "contextree.integrations", "contextree.cli", "contextree.runtime", "contextree.tools",
    "contextree.models", "contextree.storage", "contextree._session", "contextree.entries",
    "msgspec", "orjson", "inspect", "dataclasses", *HEAVY_LIBRARIES,
]
COMMAND_MODULES = ["contextree.cli.commands_read", "contextree.cli.commands_edit",
                   "contextree.cli.commands_compact", "contextree.cli.commands_interop",
                   "contextree.cli.commands_db", "contextree.cli.commands_demo",
                   "contextree.cli.chat", "contextree.cli.demo", "contextree.cli.output"]
NOT_FOR_VERSION = [
    *COMMAND_MODULES, "contextree._session", "contextree.compaction", "contextree.formats",
    "contextree.runtime", "contextree.tools", "contextree.models", "contextree.storage",
    "contextree.integrations", "msgspec", "orjson",
    *(m for m in HEAVY_LIBRARIES if m != "typer"),
]
NOT_FOR_LS = [
    "contextree.compaction", "contextree.tools", "contextree.models", "contextree.integrations",
    "contextree.formats._pi", "contextree.formats._claude_code", "contextree.formats._codex",
    "contextree.runtime._builder", "contextree.storage.postgres", "contextree._overflow",
    "contextree.cli.commands_edit", "contextree.cli.commands_compact",
    "contextree.cli.commands_interop", "contextree.cli.chat", "contextree.cli.demo",
    "rich.console", "rich.text", "rich.table", "rich.progress", "httpx", "openai", "anthropic", "tiktoken", "pydantic",
    "platformdirs", "asyncio", "psycopg", "importlib.metadata",
    # search, repair and archives, which a listing does not use (nor OpenSSL, nor logging)
    "contextree.storage._search_text", "contextree.storage._search_index",
    "contextree.storage._repair", "contextree.storage._search", "zipfile", "hashlib",
    "logging",
    # nor the session writers (a listing opens no session)
    "contextree.storage._jsonl", "contextree.storage._filetree", "contextree.storage._memory",
    "socket",
]


def _loaded_after(code: str, *argv: str) -> set[str]:
    """The modules in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    script = (f"{code}\nimport json, sys\nprint('\\n' + json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.rstrip().rsplit("\n", 1)[-1]))


def _command(*argv: str) -> str:
    """What the console script does, for ``argv``; the exit code is checked to be 0."""
    return textwrap.dedent(f"""\
        import sys
        sys.argv = ["contextree", *{list(argv)!r}]
        from contextree.cli import main
        try:
            main()
        except SystemExit as e:
            assert e.code in (0, None), e.code
        """)


# -- what a start imports ---------------------------------------------------------------------

def test_import_contextree_imports_no_layer_and_no_heavy_library() -> None:
    loaded = _loaded_after("import contextree")
    assert not loaded & set(NOT_AT_IMPORT), sorted(loaded & set(NOT_AT_IMPORT))
    assert {m for m in loaded if m.startswith("contextree")} == {"contextree",
                                                                  "contextree._public"}


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["db", "--help"]])
def test_version_and_help_import_no_command(argv: list[str]) -> None:
    loaded = _loaded_after(_command(*argv))
    assert not loaded & set(NOT_FOR_VERSION), sorted(loaded & set(NOT_FOR_VERSION))


def test_ls_of_an_empty_directory_imports_only_what_ls_needs(tmp_path: Path) -> None:
    loaded = _loaded_after(_command("ls", str(tmp_path)))
    assert "contextree.cli.commands_ls" in loaded
    assert "contextree.cli.commands_read" not in loaded  # ls has its own light module
    assert not loaded & set(NOT_FOR_LS), sorted(loaded & set(NOT_FOR_LS))


@pytest.mark.parametrize("command", ["tree", "show", "stats"])
def test_read_commands_import_no_pydantic(command: str, tmp_path: Path) -> None:
    # tree and show take a repeatable --redact-pattern (list[str]): Typer's adapter for it
    # would import pydantic (~0.1 s); the values reach the command all the same
    import contextree as ct

    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        s.append_message(ct.Message.user("hello world"))
    loaded = _loaded_after(_command(command, str(path)))
    assert "pydantic" not in loaded
    if command != "stats":
        out = subprocess.run([sys.executable, "-m", "contextree", command, str(path),
                              "--redact-pattern", "hel+o", "--redact-pattern", "wor.d"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "[REDACTED:custom:1] [REDACTED:custom:2]" in out.stdout


@pytest.mark.parametrize(("env", "styled"), [({}, False), ({"FORCE_COLOR": "1"}, True),
                                             ({"TTY_COMPATIBLE": "1"}, True)])
def test_piped_output_is_plain_without_rich_unless_the_environment_asks(
        env: dict[str, str], styled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # stdout is a pipe here: plain lines, and no rich console built to find that out; the
    # variables rich honours still make it style the output, as before.
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    loaded = _loaded_after("from contextree.cli.output import Out\n"
                           f"assert Out().rich is {styled}")
    assert ("rich.console" in loaded) is styled


def test_the_version_is_the_one_in_pyproject() -> None:
    import importlib.metadata
    import tomllib

    from contextree.cli.app import package_version

    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert package_version() == ct.__version__ == project["project"]["version"]
    assert importlib.metadata.version("contextree") == ct.__version__


def test_a_name_imports_its_own_module_not_its_layer() -> None:
    loaded = _loaded_after("import contextree\ncontextree.Session\ncontextree.Message\n"
                           "contextree.OverflowStore")
    assert {"contextree._session", "contextree._messages"} <= loaded
    unwanted = {"contextree.compaction", "contextree.tools", "contextree.runtime",
                "contextree.models", "contextree.formats", "contextree.cli", *HEAVY_LIBRARIES}
    assert not loaded & unwanted, sorted(loaded & unwanted)
    # The digest reads the tool kinds, not the tools.
    loaded = _loaded_after("import contextree.compaction._digest")
    assert "contextree.tools._kinds" in loaded and "contextree.tools._shell" not in loaded


# -- the names still resolve, published -------------------------------------------------------

def test_every_root_name_resolves_with_its_public_module() -> None:
    for name in ct.__all__:
        obj = getattr(ct, name)
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__")):
            assert obj.__module__ == "contextree", (name, obj.__module__)
    assert set(ct.__all__) <= set(dir(ct))
    assert {"compaction", "storage", "tools", "runtime", "formats"} <= set(dir(ct))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ct.Nope  # noqa: B018


def test_a_name_is_published_however_it_is_first_reached() -> None:
    # Reached through private modules first, never through the root: still the root's path.
    code = textwrap.dedent("""\
        import pickle
        from contextree._session import Session
        from contextree.tools._tool import Tool
        from contextree.runtime._builder import Agent
        from contextree.storage._repair import RepairReport
        from contextree.compaction._stages import Digest
        from contextree.tools._kinds import ToolKind
        seen = [c.__module__ for c in (Session, Tool, Agent, RepairReport, Digest, ToolKind)]
        assert seen == ["contextree"] * 4 + ["contextree.compaction", "contextree"], seen
        assert pickle.loads(pickle.dumps(Tool)) is Tool
        import contextree
        assert contextree.Session is Session and contextree.compaction.Digest is Digest
        """)
    _loaded_after(code)


LAZY_NAMESPACES = ["contextree", "contextree.tools", "contextree.models",
                   "contextree.compaction", "contextree.runtime", "contextree.formats",
                   "contextree.storage"]


@pytest.mark.parametrize("namespace", LAZY_NAMESPACES)
def test_the_lazy_table_is_what_type_checkers_see(namespace: str) -> None:
    """The imports under ``if TYPE_CHECKING:`` (what mypy and editors see) name the same
    modules and names as the table the namespace loads from at run time."""
    from contextree import _public

    module = importlib.import_module(namespace)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    seen: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.dump(imp)
                # A package's "from ." is the package itself, "from .." its parent.
                base = namespace.split(".")[:len(namespace.split(".")) - imp.level + 1] \
                    if imp.level else []
                target = ".".join([*base, *([imp.module] if imp.module else [])])
                for alias in imp.names:
                    submodule = imp.level == 1 and imp.module is None
                    seen[alias.name] = "" if submodule else target  # "": an attribute
    table = _public._TABLES[namespace]
    if namespace == "contextree.formats":  # imported for annotations only
        for name in ("Session", "AnyEntry", "SessionHeader", "Redactor", "EncodedEntry"):
            seen.pop(name)
    assert seen == table
    own = {name for name in module.__all__ if name not in table}  # defined in the namespace
    assert all(getattr(module, name).__module__ == namespace for name in own), own
    for name in set(module.__all__) - own:
        assert getattr(module, name) is getattr(importlib.import_module(table[name]), name)


# -- the command line lists what it has not imported -----------------------------------------

def test_the_command_table_matches_the_commands() -> None:
    import typer.core
    import typer.main

    app_module = importlib.import_module("contextree.cli.app")  # (contextree.cli.app: the app)

    group = typer.main.get_command(app_module.app)
    for table, parent in ((app_module.COMMANDS, group),
                          (app_module.DB_COMMANDS, group.commands["db"])):
        for name, lazy in table.items():
            command = parent.get_command(None, name)  # type: ignore[attr-defined]
            assert command is not None, name
            assert command.callback.__module__ == f"contextree.cli.{lazy.module}", name
            for width in (20, 45, 80, 200):  # what --help prints, at any width
                assert command.get_short_help_str(width) == \
                    typer.core.TyperCommand(name, help=lazy.summary).get_short_help_str(width)
    registered = {info.name for info in app_module.app.registered_commands}
    assert registered == set(app_module.COMMANDS)


def test_help_before_and_after_the_commands_are_imported_is_the_same() -> None:
    show = ("import contextlib, io, sys\nfrom contextree.cli import app\n"
            "import typer.main\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
            "    typer.main.get_command(app).main(['--help'], prog_name='contextree')\n"
            "print(out.getvalue())\n")
    lazy = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True,
                          timeout=60)
    every = subprocess.run([sys.executable, "-c", "\n".join(
        f"import {m}" for m in COMMAND_MODULES) + "\n" + show], capture_output=True, text=True,
        timeout=60)
    assert lazy.returncode == every.returncode == 0, lazy.stderr + every.stderr
    assert "  ls " in lazy.stdout and "  chat " in lazy.stdout
    assert lazy.stdout == every.stdout
