"""Stable placeholders: the same secret gets the same ``[REDACTED:<kind>:<n>]`` tag.

A ``Placeholders`` book lives as long as the ``Redactor`` that owns it. The first time a
secret is seen it gets the next number of its kind; every later sighting, in any text, any
entry, any call, gets the same tag, so a reader can still tell that two redacted values were
the same value (the same key used twice) without seeing it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["PREFIX", "KnownSecrets", "Placeholders", "is_placeholder_text", "is_placeholder_value"]

PREFIX = "[REDACTED:"
"""How every placeholder starts; text that starts so is never redacted again."""


class Placeholders:
    """The tags handed out so far: secret to tag, and how many distinct secrets per kind."""

    __slots__ = ("_counts", "_tags")

    def __init__(self) -> None:
        self._tags: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def tag(self, secret: str, kind: str) -> str:
        """The tag of ``secret``: the one it already has, else the next number of ``kind``."""
        tag = self._tags.get(secret)
        if tag is None:
            n = self._counts.get(kind, 0) + 1
            self._counts[kind] = n
            tag = f"{PREFIX}{kind}:{n}]"
            self._tags[secret] = tag
        return tag

    def known(self, secret: str) -> str | None:
        """The tag ``secret`` was given, or ``None`` if it was never seen."""
        return self._tags.get(secret)

    @property
    def counts(self) -> dict[str, int]:
        """Distinct secrets per kind so far (a copy)."""
        return dict(self._counts)

    def __len__(self) -> int:
        return len(self._tags)


def is_placeholder_text(value: str) -> bool:
    """True for a value that is already a placeholder (so a second pass leaves it)."""
    return value.startswith(PREFIX)


_STOP_VALUES = frozenset((
    "", "null", "none", "nil", "true", "false", "undefined", "required", "optional", "string",
    "str", "bytes", "int", "yes", "no", "on", "off", "redacted", "hidden", "masked", "secret",
    "password", "token", "pass", "passwd", "pwd", "not-needed", "dummy", "placeholder",
    "example", "sample", "changeme", "the", "a", "an", "is", "are", "was", "to", "of", "and",
    "or", "not", "in", "for", "with", "your", "my", "this", "that", "which", "if", "when",
    "env", "environ", "getenv", "os", "process", "config", "settings", "self", "args",
))


# a reference, not a value: $VAR ${VAR} $(cmd) %VAR% <your-key> {{ secrets.X }} (...)
_REFERENCE = re.compile(r"\$[A-Za-z_{(]|%[A-Za-z_][A-Za-z0-9_]*%$|<[^>]*>$|\{\{|\{[A-Za-z_]|\(")


def is_placeholder_value(value: str) -> bool:
    """True for a value that holds no secret: a variable reference, a mask, a type name..."""
    v = value.strip()
    if len(v) < 4 or v.lower() in _STOP_VALUES or is_placeholder_text(v):
        return True
    if _REFERENCE.match(v) or v.startswith(("process.env", "os.environ", "env.", "secrets.",
                                            "vars.")):
        return True
    return len(set(v)) <= 2  # "****", "xxxxxxxx", "...."



class KnownSecrets:
    """Secrets found by their context (a key's value, a URL's password, a user pattern),
    looked for again as plain text wherever they recur: ``"password": "Tr0ub4dor&3"`` in a
    tool call, then ``mysql -pTr0ub4dor&3`` in its output.

    Only secrets that cannot be common words are kept (``MIN_LENGTH`` characters or more,
    with a digit, a symbol or mixed case; a password ``master`` is not looked for in every
    git log), at most ``LIMIT`` of them, found anywhere (``-pTr0ub4dor&3`` too). Each is a
    substring search (C speed), so the cost is ``LIMIT`` passes at most.
    """

    MIN_LENGTH = 8
    LIMIT = 64

    __slots__ = ("_kinds",)

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}

    def add(self, secret: str, kind: str) -> None:
        """Remember ``secret`` if it is distinctive enough to search for."""
        if (len(self._kinds) >= self.LIMIT or secret in self._kinds
                or len(secret) < self.MIN_LENGTH or is_placeholder_text(secret)):
            return
        plain = secret.isalpha() and (secret.islower() or secret.isupper())
        if not plain and "\n" not in secret:
            self._kinds[secret] = kind

    def __len__(self) -> int:
        return len(self._kinds)

    def replace_new(self, text: str, since: int, tags: Placeholders) -> str:
        """``text`` with every secret remembered after the first ``since`` replaced by its
        tag: a secret found by its context after an earlier mention of it in the same
        text (``mysql -pTr0ub4dor&3`` before ``password=Tr0ub4dor&3``)."""
        for secret in list(self._kinds)[since:]:
            tag = tags.known(secret)
            if tag is not None:
                text = text.replace(secret, tag)
        return text

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        """Each occurrence of a remembered secret."""
        for secret, kind in self._kinds.items():
            n = len(secret)
            pos = text.find(secret)
            while pos >= 0:
                yield pos, pos + n, kind
                pos = text.find(secret, pos + n)
