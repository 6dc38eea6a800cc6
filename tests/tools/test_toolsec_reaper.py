"""The shell tool's timeout against a command that attacks its own reaper.

Each command kills (or stops) the process above it, then starts a child in a new session
that should outlive the timeout. After the tool returns, /proc is scanned for the child's
marker (its argv[0]): nothing may survive.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextree import OverflowStore
from contextree.tools import ToolContext, ToolResult, Workspace, shell

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

REAPER = "$(awk '/^PPid:/{print $2}' /proc/$PPID/status)"  # the process above bash's parent


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))


@pytest.fixture
def marker() -> Iterator[str]:
    name = f"toolsec-{uuid.uuid4().hex[:12]}"
    yield name
    for pid in marked(name):  # a failed test leaves nothing behind
        os.kill(pid, signal.SIGKILL)


def marked(name: str) -> list[int]:
    """Live (not zombie) processes whose command line carries ``name``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if name.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def survivors(name: str, grace: float = 5.0) -> list[int]:
    """The marked processes still alive after ``grace`` seconds (SIGKILL is asynchronous)."""
    deadline = time.monotonic() + grace
    while (pids := marked(name)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def run(ctx: ToolContext, command: str, timeout: float = 2) -> ToolResult:
    return shell.run({"command": command, "timeout": timeout}, context=ctx)


def child(name: str, *, redirected: bool = False) -> str:
    """A command that starts a marked ``sleep`` in a new session, in the background."""
    out = " > /dev/null 2>&1" if redirected else ""
    return f"setsid bash -c 'exec -a {name} sleep 1000'{out} &"


@pytest.mark.parametrize("attack", [
    pytest.param("kill -9 $PPID", id="kill-parent"),
    pytest.param(f"kill -9 $PPID {REAPER}", id="kill-parent-and-reaper"),
    pytest.param(f"kill -STOP {REAPER}; kill -9 $PPID", id="stop-reaper"),
    pytest.param(f"kill -9 {REAPER}", id="kill-reaper"),
])
def test_a_command_that_kills_its_reaper_is_still_killed_at_the_timeout(
        ctx: ToolContext, marker: str, attack: str) -> None:
    r = run(ctx, f"{attack}; {child(marker)} {child(marker + 'b')} sleep 1000")
    assert r.meta is not None and r.meta["timed_out"] is True
    assert not survivors(marker)


def test_a_job_that_outlives_its_killed_parent_is_part_of_the_command(
        ctx: ToolContext, marker: str) -> None:
    # bash exits at once, but its setsid child keeps the output open: the command is not over
    r = run(ctx, f"kill -9 $PPID; {child(marker)} exit 0")
    assert r.meta is not None and r.meta["timed_out"] is True
    assert not survivors(marker)


def test_killing_bashs_parent_leaves_the_reaper_in_charge(ctx: ToolContext,
                                                          marker: str) -> None:
    # The decoy dies, the reaper adopts bash: a redirected job is still killed at the timeout
    # (it is the reaper's descendant), and bash's exit code still comes through.
    r = run(ctx, f"kill -9 $PPID; {child(marker, redirected=True)} sleep 1000")
    assert r.meta is not None and r.meta["timed_out"] is True
    assert not survivors(marker)
    done = run(ctx, "kill -9 $PPID; echo still here; exit 7")
    assert done.content.startswith("still here\n")
    assert done.meta is not None and done.meta["exit_code"] == 7


def test_a_forking_child_is_stopped_before_it_is_killed(ctx: ToolContext, marker: str) -> None:
    # A holder that keeps forking new holders: each is stopped, then all are killed.
    spawner = (f"setsid bash -c 'while :; do (exec -a {marker} sleep 1000) & sleep 0.01; done' &")
    r = run(ctx, f"kill -9 $PPID {REAPER}; {spawner} sleep 1000", timeout=1)
    assert r.meta is not None and r.meta["timed_out"] is True
    assert not survivors(marker)
