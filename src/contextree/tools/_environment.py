"""``ShellEnvironment``: which environment variables the ``shell`` tool passes to a command,
and ``protect_process``: keeping the agent's own environment out of a command's reach.

By default every variable passes except those that look like they hold a secret: by name
(``SECRET_NAMES``: ``*_KEY``, ``*_TOKEN``, ``*PASS*``, ``*AUTH*``, ``*_DSN``, database URLs...)
or by value (a URL with a user or password in it, ``password=...`` and the like, a private
key, a well-known API key format), so a model that runs ``env`` or ``curl`` cannot read or
send the agent's own API keys. Name a variable in ``allow`` to pass it anyway, or give
``only`` for a strict allowlist.

Withholding a variable is not enough on its own: the command runs as the same user, and
Linux lets a process read ``/proc/<pid>/environ`` and ``/proc/<pid>/mem`` of every process of
its user. ``protect_process`` closes that for the agent process (``PR_SET_DUMPABLE`` 0), and
the reaper drops the capabilities that would get around it when the agent runs as root
(``contextree.tools._reaper``).
"""

from __future__ import annotations

import ctypes
import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["SECRET_NAMES", "ShellEnvironment", "looks_secret", "protect_process"]

SECRET_NAMES: tuple[str, ...] = (
    # keys, tokens and secrets, bare or as a part of a name
    "KEY", "*_KEY", "*_KEYS", "*_KEY_ID", "*APIKEY*", "*API_KEY*", "*PRIVATE_KEY*",
    "TOKEN", "*_TOKEN", "*_TOKENS", "*TOKEN_*", "*JWT*",
    "SECRET", "*_SECRET", "*_SECRETS", "*SECRET_*",
    # passwords: PASSWORD, PASSWD, PASSPHRASE, *_PASS, MYSQL_PWD (not PWD or OLDPWD)
    "*PASS*", "*_PWD*", "*_PAT", "*CREDENTIAL*", "*COOKIE*",
    # authentication: SSH_AUTH_SOCK, DOCKER_AUTH_CONFIG, *_OAUTH_* (not GIT_AUTHOR_NAME)
    "AUTH", "AUTH_*", "*_AUTH", "*_AUTH_*", "*OAUTH*", "*AUTHORIZATION*",
    # URLs that are credentials themselves, and connection strings of data stores
    "*WEBHOOK*", "*_DSN", "DSN", "*CONNECTION_STRING*",
    "*DATABASE*_UR[LI]", "DB_UR[LI]", "*_DB_UR[LI]", "*PG_UR[LI]", "*POSTGRES*_UR[LI]",
    "*MYSQL*_UR[LI]", "*MONGO*_UR[LI]", "*REDIS*_UR[LI]", "*AMQP*_UR[LI]",
    "*BROKER_UR[LI]",
)
"""Name patterns (case-insensitive, ``fnmatch``) of variables withheld unless allowed."""

_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]+@"  # a URL with userinfo: scheme://user:pass@host
    r"|(?:^|[\s?&;,])[\w.-]*(?:pass|pwd|secret|token|key|auth|sig|credential)[\w.-]*="
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{16,}"
    r"|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{30,})",
    re.IGNORECASE,
)


def looks_secret(value: str) -> bool:
    """Whether a variable's value carries a credential whatever its name: a URL with a user
    or password (``https://user:pass@proxy``), a ``password=``/``token=``/``key=`` pair (as in
    a query string or a connection string), a private key, or a well-known API key format."""
    return _SECRET_VALUE.search(value) is not None


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


@dataclass(frozen=True)
class ShellEnvironment:
    """What a ``shell`` command's environment holds, built from this process's.

    ``hide``: name patterns withheld (default ``SECRET_NAMES``); ``check_values``: also
    withhold any variable whose value ``looks_secret``; ``allow``: names or patterns passed
    even when ``hide`` or the value check would withhold them; ``only``: when set, nothing
    else passes at all (a strict allowlist; ``allow`` still adds to it); ``extra``:
    variables set on top of whatever passes. ``protect_process``: before running a
    command, make this process's environment and memory unreadable to it
    (``protect_process()``; it costs core dumps and debugger attach, see there).
    """

    hide: tuple[str, ...] = SECRET_NAMES
    allow: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    check_values: bool = True
    protect_process: bool = True

    def passes(self, name: str, value: str | None = None) -> bool:
        """Whether the variable ``name`` (holding ``value``, when given) reaches the command."""
        if self.allow and _matches(name, self.allow):
            return True
        if self.only is not None:
            return _matches(name, self.only)
        if _matches(name, self.hide):
            return False
        return not (self.check_values and value is not None and looks_secret(value))

    def build(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a command: what passes of ``base`` (default ``os.environ``)
        plus ``extra``."""
        source = os.environ if base is None else base
        env = {k: v for k, v in source.items() if self.passes(k, v)}
        env.update(self.extra)
        return env

    def withheld(self, base: Mapping[str, str] | None = None) -> list[str]:
        """The names of ``base`` (default ``os.environ``) that do not reach the command."""
        source = os.environ if base is None else base
        return sorted(k for k, v in source.items()
                      if not self.passes(k, v) and k not in self.extra)


_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_libc: ctypes.CDLL | None = None


def protect_process() -> bool:
    """Make this process's ``/proc/<pid>/environ``, ``mem``, ``maps`` and ``fd`` unreadable
    to the other processes of its user, a shell command included; True when that holds.

    Linux ``prctl(PR_SET_DUMPABLE, 0)``: the kernel then lets only a process with
    ``CAP_SYS_PTRACE`` read them (the reaper drops it from commands of a root agent). It
    costs this process its core dumps and lets no debugger or profiler of the same user
    (``gdb -p``, ``py-spy``, ``strace -p``) attach; ``ps e`` and ``lsof -p`` show nothing
    of it, and unless it runs as root it cannot read its own ``/proc/self/environ`` either
    (``os.environ`` is unaffected). Its command line (``/proc/<pid>/cmdline``) stays readable
    by everyone. Elsewhere than Linux this does nothing and returns False.
    """
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        return int(_libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
