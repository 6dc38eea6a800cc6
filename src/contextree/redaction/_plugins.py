"""detect-secrets' regex plugins as extra detectors (the ``secrets`` extra, imported lazily).

detect-secrets (Yelp) keeps a plugin per provider; each ``RegexBasedDetector`` has a
``denylist`` of compiled patterns and a ``secret_type``. Their patterns are taken as they
are, and run here rather than through detect-secrets' line scanner, for two reasons: that
scanner reads files line by line for a baseline (contextree redacts strings), and several
patterns have unbounded repetitions (``.+``, ``{70,}``) that Python's ``re`` can take
quadratic time on. So each pattern runs on RE2 when ``google-re2`` is installed (linear
time; the two look-arounds the plugins use are rewritten for it, see ``_REWRITES``), else
on Python's ``re`` over windows of at most ``WINDOW`` characters (whole lines where they
fit): bounded work per window, linear in the text.

What the built-in detectors already find better is not duplicated (they run first and keep
what they find); the plugins add the shapes contextree has no detector for (Artifactory,
Cloudant, SoftLayer...). Plugins that find what is not a secret here (public IP
addresses), that need a file's context (keyword, entropy) or that only name keys the
built-in key rule finds (IBM's) are not used.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from ._detectors import Hit
from ._patterns import re2_matches
from ._prefilter import IGNORE_CASE, needles_of

__all__ = ["MODULES", "WINDOW", "PluginGate", "PluginPattern", "available", "plugin_detectors"]

WINDOW = 4096
_OVERLAP = 512
_SKIPPED = frozenset((
    "IPPublicDetector", "KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString",
    # keyword patterns (``ibm_cloud_iam_api_key = "..."``) that the built-in key rule finds,
    # with a look-ahead RE2 cannot run: half the plugins' time on Python's re
    "IbmCloudIamDetector", "IbmCosHmacDetector",
))


def _kind(secret_type: str) -> str:
    """``"AWS Access Key"`` -> ``"aws-access-key"``."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-") or "secret"


def available() -> bool:
    """Whether detect-secrets is installed."""
    try:
        import detect_secrets  # noqa: F401
    except ImportError:
        return False
    return True


class PluginPattern:
    """One pattern of one detect-secrets plugin."""

    def __init__(self, kind: str, pattern: re.Pattern[str]) -> None:
        self.kind = kind
        self.source = pattern.pattern
        self._groups = pattern.groups
        self._fast: Any = _re2_compile(pattern)
        self._slow = pattern
        self.needles = needles_of(pattern)

    def find(self, text: str) -> Iterator[Hit]:
        """Each match; its first non-empty group is the secret when it has groups."""
        if self._fast is not None:
            yield from self._hits(iter(re2_matches(self._fast, text)), 0)
            return
        for start, chunk in _windows(text):
            yield from self._hits(self._slow.finditer(chunk), start)

    def _hits(self, matches: Iterator[Any], base: int) -> Iterator[Hit]:
        for m in matches:
            span = m.span(0)
            for g in range(1, self._groups + 1):
                s, e = m.span(g)
                if e > s:
                    span = (s, e)
                    break
            if span[1] > span[0]:
                yield base + span[0], base + span[1], self.kind


def _windows(text: str) -> Iterator[tuple[int, str]]:
    """``text`` in windows of at most ``WINDOW`` characters, each ending at a line end when
    it holds one (lines are never split), a longer line cut with an overlap of
    ``_OVERLAP`` so that a secret on a cut is still whole in one window."""
    pos = 0
    n = len(text)
    while pos < n:
        if n - pos <= WINDOW:
            yield pos, text[pos:]
            return
        nl = text.rfind("\n", pos, pos + WINDOW)
        if nl >= 0:
            yield pos, text[pos:nl]
            pos = nl + 1
        else:
            yield pos, text[pos:pos + WINDOW]
            pos += WINDOW - _OVERLAP


# The look-arounds RE2 lacks, as the plugins write them, and what RE2 runs instead: "not
# followed by a word character" is dropped (a longer token is cut at the shape's end, which
# still removes the secret), "after a non-word character or at the start of a line" becomes
# that character or the line start (the plugins that use it capture the secret in a group).
_REWRITES = (("(?!\\w)", ""), ("(?:(?<=\\W)|(?<=^))", "(?:(?m:^)|\\W)"))


def _re2_compile(pattern: re.Pattern[str]) -> Any:
    try:
        import re2
    except ImportError:
        return None
    if pattern.flags & re.VERBOSE:
        return None
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not pattern.flags & re.IGNORECASE
    source = pattern.pattern
    for old, new in _REWRITES:
        source = source.replace(old, new)
    try:
        return re2.compile(source, options)
    except (re2.error, UnicodeEncodeError):
        return None


# The plugin modules whose patterns are used, in the order their secret types sort (the
# order the plugins run in); the skipped ones are left out. What detect-secrets' registry
# would find by importing every module of the package, named here so that only these are
# imported (``tests/redaction/test_plugins.py`` checks it against the registry).
MODULES = (
    "aws", "artifactory", "azure_storage_key", "basic_auth", "cloudant", "discord",
    "github_token", "gitlab_token", "jwt", "mailchimp", "npm", "openai", "private_key",
    "pypi_token", "sendgrid", "slack", "softlayer", "square_oauth", "stripe",
    "telegram_token", "twilio",
)

# What every match of some plugin pattern holds (``PluginGate``): literals, in any case...
_GATE_NEEDLES = (
    "akia", "asia", "abia", "acca", "a3t", "akc", "accountkey=", "cloudant.com", "gho_",
    "ghp_", "ghr_", "ghs_", "ghu_", "gldt-", "glft-", "glpat-", "glrt-", "glsoat-", "glcbt-",
    "glimt-", "glptt-", "glagent-", "gloas-", "gr1348941", "eyj", "/:_authtoken=",
    "t3blbkfj", "private key", "putty-user-key-file", "pypi-age", "xoxa-", "xoxb-", "xoxo-",
    "xoxp-", "xoxr-", "xoxs-", "hooks.slack.com/services/", "/soap/v", "sq0csp-", "k_live_",
)
# ... or else a shape: these, one for the patterns whose literals are too short to look for
# (each is wider than the patterns it stands for: a text it passes may still hold nothing).
_GATE_SHAPES = (
    r"""(?i:aws.{0,48}['"][0-9a-z/+]{40}['"])""",  # aws: a key after a keyword, quoted
    r"AP[\dA-F][A-Za-z0-9]{8}",  # artifactory's password
    r"://[^:/?#@\s]+:[^:/?#@\s]+@",  # basic auth in a URL
    r"(?i:(?:cloudant|clou|cl|softlayer|sl)[_-]?(?:api)?[_-]?(?:key|pw|pass|token))",
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.",  # discord
    r"[0-9a-z]{32}-us[0-9]",  # mailchimp
    r"SG\.[a-zA-Z0-9_-]{22}\.",  # sendgrid
    r"\d{8}:[0-9A-Za-z_-]{35}",  # telegram
    r"(?:AC|SK)[a-z0-9]{32}",  # twilio
)


class PluginGate:
    """Where detect-secrets' plugins run, before they are imported (its import is 0.15-0.25
    s, more than a command that prints a branch takes): the prefilter selects it for a
    text that holds one of the needles or shapes every plugin match holds, and the
    ``Redactor`` then replaces it with the plugins' patterns (``plugin_detectors``). A
    text it is not selected for cannot hold what a plugin finds, so nothing is missed."""

    needles = (IGNORE_CASE, *_GATE_NEEDLES)
    shape = "|".join(f"(?:{s})" for s in _GATE_SHAPES)

    def find(self, text: str) -> Iterator[Hit]:
        """Nothing: the gate is replaced before it would run."""
        return iter(())


_CACHE: list[PluginPattern] | None = None
_MISSING = False  # detect-secrets was looked for and is not installed


def plugin_detectors(wanted: bool | None) -> list[PluginPattern]:
    """The plugins' patterns: ``None`` when installed, ``True`` required, ``False`` none."""
    global _CACHE, _MISSING
    if wanted is False or (_MISSING and not wanted):
        return []
    if _CACHE is None:
        try:
            from detect_secrets.plugins.base import RegexBasedDetector
            modules = [importlib.import_module(f"detect_secrets.plugins.{name}")
                       for name in MODULES]
        except ImportError:
            _MISSING = True
            if wanted:
                raise ImportError("detect-secrets is not installed: pip install "
                                  "'contextree[secrets]'") from None
            return []
        found: list[tuple[str, PluginPattern]] = []
        for module in modules:
            for cls in vars(module).values():
                if (not isinstance(cls, type) or not issubclass(cls, RegexBasedDetector)
                        or cls.__module__ != module.__name__ or cls.__name__ in _SKIPPED):
                    continue
                secret_type: str = cls.secret_type  # type: ignore[assignment]
                patterns: Any = cls.denylist  # a class attribute in every plugin
                found += [(secret_type, PluginPattern(_kind(secret_type), p)) for p in patterns]
        found.sort(key=lambda sp: sp[0])  # stable: a plugin's patterns stay in their order
        _CACHE = [p for _, p in found]
    return list(_CACHE)
