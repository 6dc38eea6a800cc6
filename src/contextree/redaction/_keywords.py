"""Secrets named by their key: ``PASSWORD=...`` in an env dump, ``"api_key": "..."`` in JSON,
``token: ...`` in YAML, ``--password=...`` on a command line.

A key names a secret when its last word is one (``password``, ``secret``, ``token``,
``credentials``...) or it is a key of a known sort (``api_key``, ``access_key``,
``private_key``, ``client_secret``...): ``DB_PASSWORD`` and ``githubToken`` do,
``max_tokens``, ``token_type``, ``primary_key`` and ``PASSWORD_MIN_LENGTH`` do not.
``is_secret_key`` is the rule; ``Assignments`` finds such keys in text and takes the value
after ``=``, ``:``, ``:=`` or ``=>``; ``Redactor.value`` applies the same rule to the keys of
a dict.

The text search is anchored on the keywords (a fast literal search), then reads the key
around the keyword and the value after it: a bounded amount of work per keyword, so linear
in the text.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator

from ._detectors import Hit
from ._placeholders import is_placeholder_text

__all__ = ["Assignments", "is_placeholder_value", "is_secret_key", "kind_of_key"]

_LAST_WORDS = frozenset((
    "password", "passwd", "pwd", "pass", "passphrase", "passcode", "secret", "secrets", "token",
    "credential", "credentials", "apikey", "accesskey", "secretkey", "privatekey", "authtoken",
    "authorization", "auth", "dsn", "pat", "sessionid", "cookie",
))
_KEY_QUALIFIERS = frozenset((
    "api", "access", "secret", "private", "auth", "encryption", "signing", "client", "master",
    "account", "storage", "subscription", "app", "license", "service", "webhook", "session",
    "shared", "consumer", "sas", "admin", "deploy", "ssh", "gpg", "pgp", "jwt", "hmac",
    "crypt", "cipher", "aes", "root", "write", "read", "management", "primary", "secondary",
))
_NOT_AFTER_QUALIFIER = frozenset(("primary", "secondary"))  # primary_key is a DB column
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_KEY = 64


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(key)]


def is_secret_key(key: str) -> bool:
    """True when a key (a variable, field or flag name) names a secret."""
    words = _words(key)
    if not words:
        return False
    last = words[-1]
    if last in _LAST_WORDS:
        return not (last in ("pass", "auth") and len(words) > 1 and words[-2] in ("by", "no"))
    if last == "key" and len(words) > 1:
        prev = words[-2]
        return prev in _KEY_QUALIFIERS and not (prev in _NOT_AFTER_QUALIFIER and len(words) == 2)
    return False


def kind_of_key(key: str) -> str:
    """The placeholder kind for a secret named by ``key``."""
    words = _words(key)
    last = words[-1] if words else ""
    if last in ("password", "passwd", "pwd", "pass", "passphrase", "passcode"):
        return "password"
    if last in ("token", "authtoken", "pat", "authorization", "auth", "sessionid", "cookie"):
        return "token"
    if last in ("key", "apikey", "accesskey", "secretkey", "privatekey"):
        return "api-key"
    return "secret"


_STOP_VALUES = frozenset((
    "", "null", "none", "nil", "true", "false", "undefined", "required", "optional", "string",
    "str", "bytes", "int", "yes", "no", "on", "off", "redacted", "hidden", "masked", "secret",
    "password", "token", "changeme?", "the", "a", "an", "is", "are", "was", "to", "of", "and",
    "or", "not", "in", "for", "with", "your", "my", "this", "that", "which", "if", "when",
    "env", "environ", "getenv", "os", "process", "config", "settings", "self", "args",
))


def is_placeholder_value(value: str) -> bool:
    """True for a value that holds no secret: a variable reference, a mask, a type name..."""
    v = value.strip()
    if len(v) < 4 or v.lower() in _STOP_VALUES or is_placeholder_text(v):
        return True
    if v[0] in "$%<{(" or v.startswith(("process.env", "os.environ", "env.", "secrets.",
                                        "vars.", "!", "@", "&", "*")):
        return True
    return len(set(v)) <= 2  # "****", "xxxxxxxx", "...."


_STEMS = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "dsn", "sessionid",
          "cookie")
# each stem in lower, Title and UPPER case, searched as a plain literal: Python's ``re``
# finds a literal with a fast substring search, where one case-insensitive alternation
# tries every position (4x slower on source code)
_KEYWORDS = tuple(re.compile(re.escape(v)) for stem in _STEMS
                  for v in (stem, stem.title(), stem.upper()))


def _keyword_hits(text: str) -> Iterator[tuple[int, int]]:
    """Where a keyword stem occurs, in order of position."""
    return heapq.merge(*(((m.start(), m.end()) for m in k.finditer(text)) for k in _KEYWORDS))
_OP = re.compile(r"(?:\\?[\"'])?[ \t]{0,8}+(?:=>|:=|=|:)[ \t]{0,8}+"
                 # a Kubernetes env list: "- name: DB_PASSWORD" then "  value: ..."
                 r"|[ \t]*+\r?\n[ \t]{0,24}+value[ \t]*+:[ \t]*+")
_FLAG_OP = re.compile(r"(?:=|[ \t]{1,4}+)")
_VALUE = re.compile(
    r"\\\"((?:[^\"\\\n]|\\[^\"\n]){1,1024}+)\\\""  # an escaped JSON string inside a string
    r"|\"((?:[^\"\\\n]|\\.){1,1024}+)\""  # a JSON or shell double-quoted string
    r"|'([^'\n]{1,1024}+)'"
    r"|`([^`\n]{1,1024}+)`"
    r"|([^\s\"'`,;&|<>(){}\[\]\\]{1,1024}+)"  # a bare word
)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*+")


def _is_reference(bare: str, after: str, op: str) -> bool:
    """True for a bare value that is code, not a secret: a name looked up (``settings.KEY``),
    a call or subscript (``getpass()``, ``os.environ[...]``), a type (``token: Token``), or
    the next ``:`` of ``a::b`` or a time."""
    if after in ("(", "[", ":"):
        return True
    if _IDENTIFIER.fullmatch(bare) is None:
        return False
    if "." in bare and not bare.endswith("."):
        return True
    return op == ":" and bare[0].isupper() and not any(c.isdigit() for c in bare)


class Assignments:
    """Values assigned to keys that name secrets, in any text."""

    def find(self, text: str) -> Iterator[Hit]:
        """Each value of a secret-named key (see the module's rule)."""
        pos = 0
        n = len(text)
        for ks, ke in _keyword_hits(text):
            if ks < pos:
                continue  # inside the key or value just read
            low = max(pos, ks - _MAX_KEY)
            while ks > low and text[ks - 1] in _KEY_CHARS:
                ks -= 1
            high = min(n, ke + _MAX_KEY)
            while ke < high and text[ke] in _KEY_CHARS:
                ke += 1
            pos = ke
            key = text[ks:ke]
            flag = key.startswith("-")
            key = key.strip("-.")
            if not key or not is_secret_key(key):
                continue
            op = _OP.match(text, ke)
            if op is None and flag:
                op = _FLAG_OP.match(text, ke)
            if op is None:
                continue
            value = _VALUE.match(text, op.end())
            if value is None:
                continue
            g = value.lastindex or 0
            start, end = value.span(g)
            secret = text[start:end]
            if g == 5 and _is_reference(secret, text[end:end + 1], op.group(0).strip()):
                pos = max(pos, op.end())
                continue
            if is_placeholder_value(secret):
                pos = max(pos, op.end())
                continue
            yield start, end, kind_of_key(key)
            pos = end
