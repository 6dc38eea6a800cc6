"""The built-in detectors of secrets with a known shape: provider tokens, private keys, JWTs,
passwords in URLs.

Every detector finds ``Hit`` spans ``(start, end, kind)`` in a text. They are written to run
in time linear in the text, whatever it holds:

- each pattern starts with a literal (or a one-character class) and every repetition is
  bounded and possessive (``{20,250}+``): an attempt at one position reads at most a few
  hundred characters and never backtracks into them;
- no pattern ends in a look-ahead over the token's own characters (that would make each
  failed attempt re-read the rest of a long run); a token longer than its shape is cut at
  the shape's end instead, which still removes the secret;
- the two shapes that can span far (a private key block, a JWT) are found by code that
  reads each character a bounded number of times (``PrivateKeys``, ``Jwts``).

``tests/redaction/test_linear.py`` runs each on pathological input.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ._placeholders import is_placeholder_value
from ._prefilter import needles_of

__all__ = ["BUILTIN", "DB_SCHEMES", "Detector", "Hit", "Jwts", "NetrcPasswords", "PgpassLines",
           "PrivateKeys", "RegexDetector", "UrlPasswords"]

Hit = tuple[int, int, str]
"""A secret found in a text: ``text[start:end]`` is the secret, ``kind`` names its shape."""


class Detector(Protocol):
    """Something that finds secrets in a text."""

    def find(self, text: str) -> Iterator[Hit]:
        """Every secret in ``text``, as ``(start, end, kind)``."""
        ...


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True)
class RegexDetector:
    """Secrets of one kind matched by one pattern (its group ``group`` is the secret).

    Patterns start with a literal where the shape has one (``AKIA``, ``ghp_``), which
    Python's ``re`` finds with a fast substring search; a look-behind or a character class
    in front would make it try every position, ~40x slower. So what must come before the
    literal is checked here instead: ``left`` (a pattern that must end where the match
    starts, at most ``left_max`` characters back, and is part of the secret) and
    ``boundary`` (the secret does not continue a word on its left).
    """

    kind: str
    pattern: re.Pattern[str]
    group: int = 0
    boundary: bool = True
    left: re.Pattern[str] | None = None
    left_max: int = 0
    needles: tuple[str, ...] | None = None  # literals every match holds (see _prefilter)

    def find(self, text: str) -> Iterator[Hit]:
        """Every match of the pattern that passes the checks on its left."""
        g, left = self.group, self.left
        for m in self.pattern.finditer(text):
            start, end = m.span(g)
            if left is not None:
                lm = left.search(text, max(0, m.start() - self.left_max), m.start())
                if lm is None:
                    continue
                start = lm.start()
            if self.boundary and start > 0 and text[start - 1] in _TOKEN_CHARS:
                continue
            if end > start:
                yield start, end, self.kind


def _rx(kind: str, pattern: str, group: int = 0, *, boundary: bool = True,
        left: str | None = None, left_max: int = 0,
        needles: tuple[str, ...] | None = None) -> RegexDetector:
    """A ``RegexDetector``; its needles are read from the pattern unless given (a shape
    whose literals the reader cannot see: an alternation with a class in it, a short one)."""
    compiled = re.compile(pattern)
    return RegexDetector(kind, compiled, group, boundary,
                         re.compile(left + r"\Z") if left else None, left_max,
                         needles or needles_of(compiled))


DB_SCHEMES = frozenset((
    "postgres", "postgresql", "mysql", "mariadb", "mongodb", "mongodb+srv", "redis", "rediss",
    "amqp", "amqps", "mssql", "sqlserver", "oracle", "cockroachdb", "clickhouse", "jdbc",
    "postgresql+psycopg", "postgresql+psycopg2", "postgresql+asyncpg", "mysql+pymysql",
    "neo4j", "couchdb", "cassandra", "memcached", "elasticsearch", "snowflake",
))
"""URL schemes of databases and queues: a password in one is a ``db-password``."""


class UrlPasswords:
    """The password of a URL with credentials (``scheme://user:password@host``).

    Only the password is replaced: the user, host and path stay readable. Found from each
    ``://`` (a literal, so the search is fast); the scheme is read backwards from there.
    """

    needles = ("://",)
    _AFTER = re.compile(r"://([^\s:/?#@\"'<>\\]{0,256}+):([^\s/?#@\"'<>\\]{1,256}+)@")
    _SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}+$")

    def find(self, text: str) -> Iterator[Hit]:
        """Each password between ``user:`` and ``@`` after a scheme."""
        for m in self._AFTER.finditer(text):
            start, end = m.span(2)
            scheme_m = self._SCHEME.search(text, max(0, m.start() - 31), m.start())
            scheme = scheme_m.group(0).lower() if scheme_m else ""
            if scheme.startswith("jdbc:"):
                scheme = scheme[5:]
            base = scheme.split(":")[-1]
            kind = "db-password" if base in DB_SCHEMES or base.split("+")[0] in DB_SCHEMES \
                else "url-password"
            if _real_password(text[start:end]):
                yield start, end, kind


def _real_password(value: str) -> bool:
    """False for what documentation writes in a URL's password place (``user:pass@``,
    ``u:p@``, ``${PASSWORD}``); a real short password (``abc``) is still one."""
    if len(value) < 4:
        return value.lower() not in ("p", "pw", "pwd", "x", "xx", "xxx")
    return not is_placeholder_value(value)


class NetrcPasswords:
    """The password of a ``.netrc`` line (``machine HOST login USER password SECRET``): the
    keyword and its value are separated by a space only, so it is read only on a line that
    starts with ``machine`` or ``default``, not in prose ("password reset link")."""

    needles = ("password",)
    _WORD = re.compile(r"password[ \t]++(\S{1,256}+)")

    def find(self, text: str) -> Iterator[Hit]:
        """Each password of a netrc entry."""
        for m in self._WORD.finditer(text):
            line_start = text.rfind("\n", max(0, m.start() - 1024), m.start()) + 1
            if line_start == 0 and m.start() > 1024:
                continue  # a line this long is no netrc entry
            head = text[line_start:m.start()].lstrip()
            if head.startswith(("machine ", "default ")) and not is_placeholder_value(m.group(1)):
                yield m.start(1), m.end(1), "password"


class PgpassLines:
    """The password of a ``.pgpass`` line, ``host:port:database:user:password``, read within
    its line (at most ``MAX_LINE`` characters).

    Lines are found from their start (after a newline, a fast literal search) by a pattern
    that reads the first fields up to one that is a port (digits or ``*``), each field
    bounded: a time (``12:30:05``) in the middle of a line is not even looked at."""

    _FIELDS = r"[^ \t:\n]{1,1024}+:(?:[^ \t:\n]{1,1024}+:){0,2}(?:[0-9]{1,5}+|\*):"
    _FIRST = re.compile(_FIELDS)
    _LINE = re.compile(r"\n" + _FIELDS)
    MAX_LINE = 1024

    def find(self, text: str) -> Iterator[Hit]:
        """Each password field of a line of five colon-separated fields."""
        n = len(text)
        starts = [0] if self._FIRST.match(text) else []
        for start in itertools.chain(starts, (m.start() + 1 for m in self._LINE.finditer(text))):
            end = text.find("\n", start, start + self.MAX_LINE + 1)
            if end < 0:
                if n - start > self.MAX_LINE:
                    continue  # a line this long is no .pgpass entry
                end = n
            line = text[start:end].rstrip("\r")
            fields = line.split(":")
            if len(fields) == 5 and all(f and " " not in f and "\t" not in f for f in fields) \
                    and not is_placeholder_value(fields[4]):
                stop = start + len(line)
                yield stop - len(fields[4]), stop, "db-password"


class PrivateKeys:
    """A private key block, from its ``-----BEGIN ... PRIVATE KEY-----`` line to its END line.

    A block cut short (no END line, as in a truncated tool output) is redacted from the
    BEGIN line to the end of its base64 body. The END line is looked for once per BEGIN from
    where the last search stopped, so each character is read a bounded number of times even
    when a text holds a million BEGIN lines and no END.
    """

    needles = ("-----BEGIN",)
    _BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
    _END = re.compile(r"-----END[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
    _BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,.-]{0,20000}+")
    MAX_BLOCK = 20000  # the longest body taken for a key (an 8192-bit RSA key is ~6.4 KB)

    def find(self, text: str) -> Iterator[Hit]:
        """Each private key block."""
        pos = 0
        end_m: re.Match[str] | None = None
        end_searched_from = -1
        while True:
            begin = self._BEGIN.search(text, pos)
            if begin is None:
                return
            if end_searched_from < 0 or (end_m is not None and end_m.start() < begin.end()):
                end_m = self._END.search(text, begin.end())
                end_searched_from = begin.end()
            if end_m is not None and end_m.start() - begin.end() <= self.MAX_BLOCK:
                stop = end_m.end()
            else:
                body = self._BODY.match(text, begin.end())
                stop = body.end() if body else begin.end()
            yield begin.start(), stop, "private-key"
            pos = max(stop, begin.end())


class Jwts:
    """JSON Web Tokens: ``eyJ<header>.eyJ<payload>.<signature>`` (base64url, both JSON).

    Each run of base64url-and-dot characters that contains ``eyJ`` is split on its dots
    once, so a text of a million ``eyJ`` without a dot costs one pass, not a million.
    """

    needles = ("eyJ",)
    _RUN = re.compile(r"eyJ[A-Za-z0-9_.=-]*+")
    _SEGMENT = re.compile(r"[A-Za-z0-9_-]*+")

    def find(self, text: str) -> Iterator[Hit]:
        """Each token whose header and payload both decode as JSON objects by their shape."""
        for run in self._RUN.finditer(text):
            s = run.group(0)
            base = run.start()
            parts = s.split(".")
            i = 0
            offset = 0
            while i + 1 < len(parts):
                head, payload = parts[i], parts[i + 1]
                if (head.startswith("eyJ") and len(head) >= 10 and payload.startswith("eyJ")
                        and len(payload) >= 10):
                    length = len(head) + 1 + len(payload)
                    if i + 2 < len(parts):
                        length += 1 + len(parts[i + 2])
                        i += 3
                    else:
                        i += 2
                    yield base + offset, base + offset + length, "jwt"
                    offset += length + 1
                    continue
                offset += len(parts[i]) + 1
                i += 1


_TOKEN_TAIL = r"[A-Za-z0-9_-]"


def _cases(word: str) -> tuple[str, ...]:
    """``word`` in lower, Title and UPPER case: one literal pattern each, since a character
    class in front (``[Bb]earer``) or ``(?i)`` loses the fast literal search (~100x)."""
    return (word, word.title(), word.upper())

BUILTIN: tuple[Detector, ...] = (
    PrivateKeys(),
    Jwts(),
    _rx("anthropic-key", r"sk-ant-(?:api|admin|oat|ort)[0-9]{2}-" + _TOKEN_TAIL + r"{20,250}+"),
    _rx("openai-key", r"sk-(?:proj-|svcacct-|admin-|None-)?" + _TOKEN_TAIL + r"{20,250}+"),
    _rx("aws-key", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        needles=("AKIA", "ASIA", "ABIA", "ACCA", "A3T")),
    _rx("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    _rx("gcp-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,2048}+"),
    _rx("gcp-client-secret", r"GOCSPX-[0-9A-Za-z_-]{28}"),
    _rx("azure-storage-key", r"(?:AccountKey|accountkey|ACCOUNTKEY)=([A-Za-z0-9+/]{86}==)", 1,
        boundary=False),
    _rx("azure-sas", r"sig=([A-Za-z0-9%+/]{30,200}+)", 1, boundary=False),
    _rx("azure-client-secret", r"Q~[A-Za-z0-9_~.-]{31,34}+", left=r"[A-Za-z0-9_~.]{3}[0-9]",
        left_max=4, needles=("Q~",)),
    _rx("github-token", r"gh[pousr]_[A-Za-z0-9]{36,251}+"),
    _rx("github-token", r"github_pat_[A-Za-z0-9_]{22,255}+"),
    _rx("gitlab-token", r"gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat|imt|agent)-"
        + _TOKEN_TAIL + r"{20,64}+"),
    _rx("slack-token", r"xox[abposre]-[0-9A-Za-z-]{10,250}+"),
    _rx("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"([A-Za-z0-9/_-]{20,200}+)", 1, boundary=False),
    _rx("stripe-key", r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,247}+"),
    _rx("stripe-key", r"whsec_[A-Za-z0-9]{24,64}+"),
    _rx("twilio-key", r"(?:AC|SK)[0-9a-f]{32}"),
    _rx("huggingface-token", r"hf_[A-Za-z0-9]{30,40}+"),
    _rx("npm-token", r"npm_[A-Za-z0-9]{36}"),
    _rx("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{40,400}+"),
    _rx("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    _rx("mailchimp-key", r"-us[0-9]{1,2}", left=r"[0-9a-f]{32}", left_max=32),
    _rx("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}"),
    _rx("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _rx("square-token", r"(?:sq0atp|sq0csp|EAAA)[0-9A-Za-z_-]{22,60}+"),
    _rx("telegram-token", r":AA[0-9A-Za-z_-]{33}", left=r"[0-9]{8,10}", left_max=10,
        boundary=False),  # in a URL after "bot"
    _rx("discord-webhook", r"discord(?:app)?\.com/api/webhooks/([0-9]{17,20}/[A-Za-z0-9_-]{60,68}+)",
        1, boundary=False),
    *(_rx("auth-header", re.escape(word) + r"[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?"
          r"(?:[Bb]earer|BEARER|[Bb]asic|BASIC|[Tt]oken|TOKEN|[Dd]igest)[ \t]{1,4}"
          r"([A-Za-z0-9._~+/=:-]{8,4096}+)", 1, boundary=False) for word in _cases("authorization")),
    *(_rx("auth-header", re.escape(word) + r"[ \t]{1,4}([A-Za-z0-9._~+/-]{20,4096}+=*)", 1,
          boundary=False) for word in _cases("bearer")),
    UrlPasswords(),
    NetrcPasswords(),
    PgpassLines(),
)
"""The built-in detectors of shaped secrets, most specific first (the first to claim a
character keeps it)."""
