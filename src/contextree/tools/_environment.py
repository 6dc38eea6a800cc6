"""``ShellEnvironment``: which environment variables the ``shell`` tool passes to a command.

By default every variable passes except those whose names look like they hold a secret
(``SECRET_NAMES``: ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``...), so a model that
runs ``env`` or ``curl`` cannot read or send the agent's own API keys. Name a variable in
``allow`` to pass it anyway, or give ``only`` for a strict allowlist.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["SECRET_NAMES", "ShellEnvironment"]

SECRET_NAMES: tuple[str, ...] = (
    "*_KEY", "*_KEYS", "*_KEY_ID", "*APIKEY*", "*API_KEY*", "*_TOKEN", "*_TOKENS", "*TOKEN_*",
    "*_SECRET", "*_SECRETS", "*SECRET_*", "*PASSWORD*", "*PASSWD*", "*_PASS", "*_PAT",
    "*_CREDENTIAL", "*_CREDENTIALS", "*_AUTH", "*_COOKIE", "*PRIVATE_KEY*",
)
"""Name patterns (case-insensitive, ``fnmatch``) of variables withheld unless allowed."""


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


@dataclass(frozen=True)
class ShellEnvironment:
    """What a ``shell`` command's environment holds, built from this process's.

    ``hide``: name patterns withheld (default ``SECRET_NAMES``); ``allow``: names or
    patterns passed even when ``hide`` matches them; ``only``: when set, nothing else
    passes at all (a strict allowlist; ``allow`` still adds to it); ``extra``: variables
    set on top of whatever passes.
    """

    hide: tuple[str, ...] = SECRET_NAMES
    allow: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def passes(self, name: str) -> bool:
        """Whether the variable ``name`` reaches the command."""
        if self.allow and _matches(name, self.allow):
            return True
        if self.only is not None:
            return _matches(name, self.only)
        return not _matches(name, self.hide)

    def build(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a command: what passes of ``base`` (default ``os.environ``)
        plus ``extra``."""
        source = os.environ if base is None else base
        env = {k: v for k, v in source.items() if self.passes(k)}
        env.update(self.extra)
        return env

    def withheld(self, base: Mapping[str, str] | None = None) -> list[str]:
        """The names of ``base`` (default ``os.environ``) that do not reach the command."""
        source = os.environ if base is None else base
        return sorted(k for k in source if not self.passes(k) and k not in self.extra)
