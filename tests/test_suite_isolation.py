"""The test suite keeps out of the user's home: the default overflow store, chat's folder and
the XDG directories are in a temporary sandbox for the whole run (tests/conftest.py), and a
run that writes into the real home's contextree folders fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import platformdirs
import pytest

import contextree as ct
from conftest import Sandbox
from contextree import Message, OverflowStore, ToolCall
from contextree.models import ScriptedModel
from helpers import TESTS, big


def test_the_default_overflow_store_is_in_the_sandbox(sandbox_home: Sandbox) -> None:
    assert OverflowStore.default().directory == sandbox_home.overflow_dir
    assert Path.home() == sandbox_home.home
    assert Path(platformdirs.user_data_dir("contextree")).is_relative_to(sandbox_home.root)


def test_without_contextree_home_the_platform_default_is_in_the_sandbox(
        sandbox_home: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTREE_HOME")
    assert OverflowStore.default().directory.is_relative_to(sandbox_home.home)


def test_a_truncated_tool_result_spills_into_the_sandbox(sandbox_home: Sandbox,
                                                         tmp_path: Path) -> None:
    real_before = sandbox_home.real_listing()
    before = set(OverflowStore.default().files())
    agent = (ct.agent()
             .use(ct.runtime.SessionLog, path=tmp_path / "log.jsonl")
             .use(ct.runtime.ToolResultLoop)
             .use(ct.runtime.DefaultToolPipeline, tools=[big])
             .run(ScriptedModel([
                 Message.assistant("", tool_calls=[ToolCall(id="c1", name="big",
                                                            arguments={"n": 5000})]),
                 "done"])))
    agent.start("go")
    spilled = set(OverflowStore.default().files()) - before
    assert len(spilled) == 1
    (path,) = spilled
    assert path.is_relative_to(sandbox_home.overflow_dir)
    assert path.read_text() == big(5000)
    assert sandbox_home.real_listing() == real_before


LEAK = """
    from conftest import REAL_HOME

    def test_leaks() -> None:
        folder = REAL_HOME / ".local" / "share" / "contextree" / "tool-output"
        folder.mkdir(parents=True)
        (folder / "leaked.txt").write_text("x")
"""

CLEAN = """
    from contextree import OverflowStore

    def test_spills() -> None:
        assert OverflowStore.default().save("x").read_text() == "x"
"""


def run_suite(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run a one-test suite with this suite's conftest, as a user whose home is ``real``."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    (suite / "test_one.py").write_text(textwrap.dedent(body))
    real = tmp_path / "real"
    real.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("XDG_") and k not in ("CONTEXTREE_HOME", "PYTEST_ADDOPTS")}
    env["HOME"] = str(real)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(suite)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    return done, real


@pytest.mark.slow
def test_a_run_that_writes_into_the_real_home_fails(tmp_path: Path) -> None:
    done, real = run_suite(tmp_path, LEAK)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout  # the test itself passed; the guard failed the run
    assert "the tests wrote into the real home directory" in done.stdout
    assert str(real / ".local" / "share" / "contextree" / "tool-output" / "leaked.txt") \
        in done.stdout


@pytest.mark.slow
def test_a_run_that_spills_leaves_the_real_home_alone(tmp_path: Path) -> None:
    done, real = run_suite(tmp_path, CLEAN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(real.iterdir()) == []
