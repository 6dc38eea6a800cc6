"""The shell tool as a trust boundary, attacked through /proc.

An agent process holds its API key in its environment, and the shell tool withholds that
variable from the command. The command then tries to read the key back from the agent
itself, the way an attacker would: the parent's environ, every ancestor's environ, ``ps e``,
every process's environ (the agent's grep worker included), the memory of every ancestor, a
user namespace, ``/proc/kcore``.
The agent runs in a fresh process (the key must be in its exec-time environment, where
``/proc/<pid>/environ`` finds it), as this user and, when the tests run as root, as an
unprivileged one too. Each attack is also run against an agent with ``protect_process``
turned off, where it must find the key: the attacks are real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

import contextree
from contextree.tools import shell

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

AGENT = r"""
import json, os, sys, tempfile
from contextree import OverflowStore
from contextree.tools import ShellEnvironment, ToolContext, grep, shell
commands, protect = json.loads(sys.argv[1])
commands = [c.replace("AGENT_PID", str(os.getpid())) for c in commands]
with tempfile.TemporaryDirectory() as store:
    ctx = ToolContext(cwd="/", store=OverflowStore(store),
                      shell_env=ShellEnvironment(protect_process=protect))
    with open(os.path.join(store, "f.txt"), "w") as f:
        f.write("xx\n")
    # a backreference runs on Python's re in a worker process, which stays for the next grep
    assert "f.txt:1:xx" in grep.run({"pattern": r"(x)\1", "path": store}, context=ctx).content
    print(json.dumps([shell.run({"command": c, "timeout": 120}, context=ctx).content
                      for c in commands]))
"""

SECRET_RE = "sk-toolsec-[0-9a-f]{32}"
FILTER = f" 2>/dev/null | grep -a -o -E '{SECRET_RE}' | sort -u"
ANCESTORS = ("p=$$; while [ \"$p\" -gt 1 ]; do echo $p; "
             "p=$(awk '/^PPid:/{print $2}' /proc/$p/status); done")

MEMORY_SCAN = r"""
import os, re
p, found = os.getpid(), set()
while p > 1:
    try:
        with open(f"/proc/{p}/maps") as maps, open(f"/proc/{p}/mem", "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if "r" not in perms or hi - lo > 1 << 28:
                    continue
                try:
                    mem.seek(lo)
                    found.update(re.findall(rb"sk-toolsec-[0-9a-f]{32}", mem.read(hi - lo)))
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
    with open(f"/proc/{p}/status") as f:
        p = int(next(x for x in f if x.startswith("PPid:")).split()[1])
print("\n".join(sorted(x.decode() for x in found)))
"""


def attacks(python: str) -> dict[str, str]:
    """One-line commands that try to read the agent's withheld key back."""
    return {
        "parent environ": "cat /proc/$PPID/environ" + FILTER,
        "every ancestor's environ": (
            f"for p in $({ANCESTORS}); do tr '\\0' '\\n' < /proc/$p/environ; done" + FILTER),
        "ps e": "ps axeww" + FILTER,
        "every process's environ": "cat /proc/*/environ /proc/*/task/*/environ" + FILTER,
        "ancestors' memory": f"{python} -c '{MEMORY_SCAN}'" + FILTER,
        "user namespace": (f"for p in $({ANCESTORS}); do unshare -r cat /proc/$p/environ; done"
                           + FILTER),
    }


def run_agent(python: str, commands: list[str], *, protect: bool, secret: str,
              user: list[str], pythonpath: str) -> list[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": pythonpath,
        "HOME": "/",
        "OPENAI_API_KEY": secret,
        "DATABASE_URL": f"postgresql://agent:{secret}@db.example/prod",
    }
    out = subprocess.run([*user, python, "-c", AGENT, json.dumps([commands, protect])],
                         env=env, cwd="/", capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    results: list[str] = json.loads(out.stdout)
    return results


def _pythonpath() -> str:
    src = Path(contextree.__file__).resolve().parents[1]
    return os.pathsep.join([str(src), sysconfig.get_paths()["purelib"]])


PROBE = ("import subprocess, sys; import contextree.tools; "
         "subprocess.run([sys.executable, '-c', 'pass'], check=True)")  # the reaper's exec


def _as_nobody() -> tuple[list[str], str] | None:
    """How to run the agent as an unprivileged user (setpriv, an interpreter it may run)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if python is None:
            continue
        probe = subprocess.run([*user, python, "-c", PROBE],
                               env={"PYTHONPATH": _pythonpath(), "PATH": "/usr/bin:/bin"},
                               cwd="/", capture_output=True)
        if probe.returncode == 0:
            return user, python
    return None


def _runners() -> list[object]:
    params: list[object] = [pytest.param(([], sys.executable), id="same-user")]
    nobody = _as_nobody()
    params.append(pytest.param(nobody, id="unprivileged",
                               marks=pytest.mark.skipif(nobody is None,
                                                        reason="needs root and setpriv")))
    return params


@pytest.mark.parametrize("runner", _runners())
def test_a_command_cannot_read_the_agents_withheld_key_back(
        runner: tuple[list[str], str]) -> None:
    user, python = runner
    secret = f"sk-toolsec-{uuid.uuid4().hex}"
    named = attacks(python)
    commands = ["env", *named.values()]
    pythonpath = _pythonpath()

    exposed = run_agent(python, commands, protect=False, secret=secret, user=user,
                        pythonpath=pythonpath)
    assert secret not in exposed[0]  # withheld from the environment either way
    assert secret in exposed[list(named).index("every process's environ") + 1], (
        "the attack does not work even unprotected: this test would prove nothing")

    results = run_agent(python, commands, protect=True, secret=secret, user=user,
                        pythonpath=pythonpath)
    assert "PATH=" in results[0] and secret not in results[0]
    leaked = [name for name, out in zip(named, results[1:], strict=True) if secret in out]
    assert not leaked, f"the key was read back by: {leaked}"


@pytest.mark.parametrize("runner", _runners())
def test_the_agents_descriptors_and_maps_are_closed_to_its_commands(
        runner: tuple[list[str], str]) -> None:
    """docs/runtime.md: a protected agent's ``maps`` cannot be read and its links (``cwd``,
    like each ``fd/N``) cannot be followed by its commands; a non-root agent's ``fd`` cannot
    even be listed (a root command still lists a root agent's: names only). Unprotected,
    each probe works."""
    user, python = runner
    probe = ["head -c 1 /proc/AGENT_PID/maps >/dev/null 2>&1 && echo maps-read",
             "ls /proc/AGENT_PID/cwd/ >/dev/null 2>&1 && echo fd-opened",
             "ls /proc/AGENT_PID/fd >/dev/null 2>&1 && echo fd-listed",
             # its stdout, a pipe the test made: only the test's own user may open it
             "head -c 0 /proc/AGENT_PID/fd/1 2>/dev/null && echo fd-followed"]
    kw = {"secret": "none", "user": user, "pythonpath": _pythonpath()}
    maps, opened, listed, followed = run_agent(python, probe, protect=False, **kw)
    assert "maps-read" in maps and "fd-opened" in opened and "fd-listed" in listed
    assert user or "fd-followed" in followed
    maps, opened, listed, followed = run_agent(python, probe, protect=True, **kw)
    assert "maps-read" not in maps and "fd-opened" not in opened, (maps, opened)
    assert "fd-followed" not in followed, followed
    if user:  # the agent runs unprivileged
        assert "fd-listed" not in listed, listed


def test_a_root_command_loses_the_capabilities_that_read_other_processes(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root agent holds these capabilities")
    from contextree import OverflowStore
    from contextree.tools import ToolContext
    from contextree.tools._reaper import PROTECTED_CAPABILITIES

    ctx = ToolContext(cwd=tmp_path, store=OverflowStore(tmp_path / "store"))
    out = shell.run({"command": "grep -E '^Cap(Eff|Prm|Bnd|Inh):' /proc/self/status; "
                                "echo kcore=$(head -c 1 /proc/kcore 2>/dev/null | wc -c)"}, context=ctx).content
    sets = dict(line.split(":\t") for line in out.splitlines() if line.startswith("Cap"))
    assert set(sets) == {"CapEff", "CapPrm", "CapBnd", "CapInh"}
    for name, bits in sets.items():
        for cap, number in PROTECTED_CAPABILITIES.items():
            assert not int(bits, 16) >> number & 1, f"{cap} still in {name}"
    assert int(sets["CapEff"], 16) & 1  # CAP_CHOWN and the rest of root stay
    assert "kcore=0" in out  # /proc/kcore (all of memory) cannot be read


def test_the_tool_description_says_what_the_filter_does_not_stop() -> None:
    text = " ".join(shell.description.split())
    assert "not passed to the command" in text
    for limit in ("command line", "files", "other processes"):
        assert limit in text, limit
