"""Secrets named by their key: ``PASSWORD=...`` in an env dump, ``"api_key": "..."`` in JSON,
``token: ...`` in YAML, ``--password=...`` on a command line.

A key names a secret when its last word is one (``password``, ``secret``, ``token``,
``credentials``...) or it is a key of a known sort (``api_key``, ``access_key``,
``private_key``, ``client_secret``...): ``DB_PASSWORD`` and ``githubToken`` do,
``max_tokens``, ``token_type``, ``primary_key`` and ``PASSWORD_MIN_LENGTH`` do not.
``is_secret_key`` is the rule; ``Assignments`` finds such keys in text and takes the value
after ``=``, ``:``, ``:=`` or ``=>``; ``Redactor.value`` applies the same rule to the keys of
a dict.

The text search is anchored on the keywords (one pass for all of them), then reads the key
around the keyword and the value after it: a bounded amount of work per keyword, so linear
in the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from ._detectors import Hit
from ._placeholders import is_placeholder_value

__all__ = ["Assignments", "is_secret_key", "kind_of_key"]

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
_MAX_KEY = 64
_KEY_AFTER = re.compile(r"[A-Za-z0-9_.-]{0,64}+")
_KEY_RUN = re.compile(r"[A-Za-z0-9_.-]{0,64}+")  # read backwards: the key before a keyword


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(key)]


@functools.lru_cache(maxsize=4096)
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


_STEMS = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "dsn", "sessionid",
          "cookie")
# each stem in lower, Title and UPPER case (a case-insensitive pattern loses the literal
# search), all in one alternation: one pass over the text, where one pass per variant costs
# as much with no keyword in it and more with many (measured on source code and sessions;
# RE2 reads faster but hands out each match far slower, and keywords are many in code)
_VARIANTS = tuple(v for stem in _STEMS for v in (stem, stem.title(), stem.upper()))
_KEYWORDS = re.compile("|".join(re.escape(v) for v in _VARIANTS))


def _keyword_hits(text: str) -> Iterator[tuple[int, int]]:
    """Where a keyword stem occurs, in order of position (where two overlap, the first: the
    key read around it covers the other)."""
    return (m.span() for m in _KEYWORDS.finditer(text))
_OP = re.compile(r"(?:\\?[\"'])?[ \t]{0,8}+(?:=>|:=|=|:)[ \t]{0,8}+"
                 # a Kubernetes env list: "- name: DB_PASSWORD" then "  value: ..."
                 r"|[ \t]*+\r?\n[ \t]{0,24}+value[ \t]*+:[ \t]*+"
                 # XML and .NET configs: name="password" value="..." / key="ApiKey" value=
                 r"|[\"'][ \t]{1,8}+value[ \t]*+=[ \t]*+")
_FLAG_OP = re.compile(r"(?:=|[ \t]{1,4}+)")
_VALUE = re.compile(
    r"\\\"((?:[^\"\\\n]|\\[^\"\n]){1,1024}+)\\\""  # an escaped JSON string inside a string
    r"|\"((?:[^\"\\\n]|\\.){1,1024}+)\""  # a JSON or shell double-quoted string
    r"|'([^'\n]{1,1024}+)'"
    r"|`([^`\n]{1,1024}+)`"
    r"|([^\s\"'`,;&|<>(){}\[\]\\]{1,1024}+)"  # a bare word
)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*+")


_TYPES = frozenset(("object", "bool", "dict", "list", "float", "any", "tuple", "set", "callable",
                    "none", "optional", "union", "sequence", "mapping", "iterable", "secretstr",
                    "number", "boolean", "array", "char", "varchar", "text", "uuid"))


def _is_reference(key: str, bare: str, after: str, op: str) -> bool:
    """True for a bare value that is code or prose, not a secret: a name looked up
    (``settings.KEY``, ``api_key=api_key``), a call or subscript (``getpass()``,
    ``os.environ[...]``), a type (``token: Token``, ``token: object``), a path, the next
    ``:`` of ``a::b`` or a time, or a sentence going on after a colon."""
    if after in ("(", "[", ":"):
        return True
    if bare.startswith(("/", "~/", "./", "../")):
        return True
    if _IDENTIFIER.fullmatch(bare) is None:
        return False
    if bare == key or ("." in bare and not bare.endswith(".")):
        return True
    digits = any(c.isdigit() for c in bare)
    if "_" in bare and bare.islower() and not digits:
        return True  # a snake_case name passed on: api_key=api_key_from_env
    if op != ":":
        return False
    return bare.lower() in _TYPES or (bare[0].isupper() and not digits) or (
        bare.isalpha() and bare.islower() and after == " ")


class Assignments:
    """Values assigned to keys that name secrets, in any text."""

    needles = _VARIANTS

    def find(self, text: str) -> Iterator[Hit]:
        """Each value of a secret-named key (see the module's rule)."""
        pos = 0
        for ks, ke in _keyword_hits(text):
            if ks < pos:
                continue  # inside the key or value just read
            if ks:  # the key's start: the run of key characters that ends at the keyword
                lo = max(pos, ks - _MAX_KEY)
                ks -= _KEY_RUN.match(text[lo:ks][::-1]).end()  # type: ignore[union-attr]
            ke = _KEY_AFTER.match(text, ke).end()  # type: ignore[union-attr]
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
            if g == 5 and _is_reference(key, secret, text[end:end + 1], op.group(0).strip()):
                pos = max(pos, op.end())
                continue
            if is_placeholder_value(secret):
                pos = max(pos, op.end())
                continue
            yield start, end, kind_of_key(key)
            pos = end
