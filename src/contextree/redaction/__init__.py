"""Redaction: secrets out of everything that leaves contextree (export, view, copies).

``Redactor`` finds secrets with the built-in detectors (provider tokens, private keys, JWTs,
passwords in URLs, keys named like secrets in env dumps and JSON, high-entropy strings),
detect-secrets' plugins when the ``secrets`` extra is installed, and the user's patterns; it
replaces each with a stable placeholder (``[REDACTED:aws-key:1]``). The stored session is
never changed. See docs/redaction.md.
"""

from __future__ import annotations

from .._public import publish
from ._redactor import Redactor

__all__ = ["Redactor"]

publish(globals())
