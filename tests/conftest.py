"""Test-suite settings.

Isolation: when this file is imported (before pytest imports any test module, so before
contextree resolves a path), HOME, the XDG base directories, ``CONTEXTREE_HOME`` and the other
agents' homes point into one temporary directory for the whole run. The default overflow store
(``$CONTEXTREE_HOME/tool-output``), chat's session folder and ``~/.claude`` / ``~/.codex`` are
then all under it, and it is removed at the end. The real home is watched too: if anything
appears under its contextree-relevant folders during the run, the run fails and names it.

Hypothesis runs the same examples on every run (CI stays deterministic); set
HYPOTHESIS_PROFILE=explore to search new ones locally.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
import pytest
from hypothesis import settings

if TYPE_CHECKING:  # imported in the fixtures, after the sandbox is in place
    from contextree import OverflowStore
    from contextree.tools import ToolContext
    from fakes.anthropic_server import AnthropicServer
    from fakes.openai_server import OpenAIServer

settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


# -- the sandbox ---------------------------------------------------------------------------

REAL_HOME = Path(os.path.expanduser("~"))
"""The user's home directory as it was before the sandbox replaced HOME."""


def _real_watched() -> tuple[Path, ...]:
    """The real folders where contextree writes by default, resolved with the environment the
    run started with. (The agents' homes, ``~/.claude`` and ``~/.codex``, are sandboxed too but
    not watched: the user's own agents may write there while the tests run.)"""
    found = {REAL_HOME / p for p in (".local/share/contextree", ".local/state/contextree",
                                     ".cache/contextree", ".config/contextree")}
    for where in (platformdirs.user_data_dir, platformdirs.user_cache_dir,
                  platformdirs.user_config_dir, platformdirs.user_state_dir,
                  platformdirs.user_log_dir):
        found.add(Path(where("contextree")))
    if os.environ.get("CONTEXTREE_HOME"):
        found.add(Path(os.environ["CONTEXTREE_HOME"]).expanduser())
    return tuple(sorted(found))


WATCHED = _real_watched()


@dataclass(frozen=True)
class Sandbox:
    """Where the run's HOME, XDG directories and contextree home are."""

    root: Path
    home: Path
    contextree_home: Path

    @property
    def overflow_dir(self) -> Path:
        """The default overflow store's directory during the run."""
        return self.contextree_home / "tool-output"

    @staticmethod
    def real_listing() -> set[str]:
        """Every path now under the real home's contextree folders (``WATCHED``)."""
        return _listing(WATCHED)


def _make_sandbox() -> Sandbox:
    root = Path(tempfile.mkdtemp(prefix="contextree-tests-home-")).resolve()
    box = Sandbox(root, root / "home", root / "contextree")
    box.home.mkdir(mode=0o700)
    env = {
        "HOME": box.home,
        "XDG_DATA_HOME": box.home / ".local" / "share",
        "XDG_STATE_HOME": box.home / ".local" / "state",
        "XDG_CACHE_HOME": box.home / ".cache",
        "XDG_CONFIG_HOME": box.home / ".config",
        "CONTEXTREE_HOME": box.contextree_home,
    }
    for name, value in env.items():
        os.environ[name] = str(value)
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_DATA_DIRS", "XDG_CONFIG_DIRS"):
        os.environ.pop(name, None)  # the defaults under the sandbox HOME apply
    return box


SANDBOX = _make_sandbox()


def _listing(roots: tuple[Path, ...]) -> set[str]:
    """Every path under ``roots`` (the roots too, when they exist), without following links."""
    seen: set[str] = set()
    for root in roots:
        if not os.path.lexists(root):
            continue
        seen.add(str(root))
        for top, dirs, files in os.walk(root):
            seen.update(os.path.join(top, name) for name in (*dirs, *files))
    return seen


_BEFORE = _listing(WATCHED)
_ADDED = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session", autouse=True)
def sandbox_home() -> Iterator[Sandbox]:
    """The temporary HOME of this run; fails a test that changed where it points."""
    yield SANDBOX
    assert os.environ.get("CONTEXTREE_HOME") == str(SANDBOX.contextree_home), \
        "a test left CONTEXTREE_HOME pointing outside the sandbox; use monkeypatch.setenv"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if anything appeared in the real home's contextree folders."""
    added = sorted(_listing(WATCHED) - _BEFORE)
    session.config.stash[_ADDED] = added
    if added and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SANDBOX.root, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """Name what the run wrote into the real home, if anything."""
    added = config.stash.get(_ADDED, [])
    if added:
        terminalreporter.write_sep("!", "the tests wrote into the real home directory",
                                   red=True, bold=True)
        for path in added[:20]:
            terminalreporter.write_line(f"added: {path}")
        if len(added) > 20:
            terminalreporter.write_line(f"... and {len(added) - 20} more")


# -- shared fixtures -----------------------------------------------------------------------

@pytest.fixture
def oa() -> Iterator[OpenAIServer]:
    """A local server that speaks the OpenAI Chat Completions API."""
    from fakes.openai_server import OpenAIServer

    with OpenAIServer() as s:
        yield s


@pytest.fixture
def an() -> Iterator[AnthropicServer]:
    """A local server that speaks the Anthropic Messages API."""
    from fakes.anthropic_server import AnthropicServer

    with AnthropicServer() as s:
        yield s


@pytest.fixture
def sess(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A session file made by ``helpers.make_session``, and the ids of its entries."""
    from helpers import make_session

    path = tmp_path / "s.jsonl"
    return path, make_session(path)


@pytest.fixture
def store(tmp_path: Path) -> OverflowStore:
    """An overflow store of its own in tmp_path, without automatic gc."""
    from contextree import OverflowStore

    return OverflowStore(tmp_path / "spill", gc_interval=None)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(ws: Path, tmp_path: Path) -> ToolContext:
    """A tool context on ``ws`` with an overflow store in tmp_path."""
    from contextree import OverflowStore
    from contextree.tools import ToolContext, Workspace

    return ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))
