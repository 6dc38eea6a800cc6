"""Secrets for the redaction tests, made at run time: random, of each provider's real shape.

None is written in the repository as a literal, so no secret scanner flags the test files,
and each run uses the same ones (a seeded generator).
"""

from __future__ import annotations

import random
import string

_rng = random.Random(23)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def rand(alphabet: str, n: int) -> str:
    """``n`` characters drawn from ``alphabet``."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


def aws_key() -> str:
    """An AWS access key id."""
    return "AKIA" + rand(UPPER, 16)


def aws_secret() -> str:
    """An AWS secret access key (40 base64 characters)."""
    return rand(ALNUM + "/+", 40)


def github_token() -> str:
    """A GitHub personal access token (classic)."""
    return "ghp_" + rand(ALNUM, 36)


def anthropic_key() -> str:
    """An Anthropic API key."""
    return "sk-ant-api03-" + rand(ALNUM + "-_", 93) + "AA"


def stripe_key() -> str:
    """A Stripe live secret key."""
    return "sk_" + "live_" + rand(ALNUM, 24)


def password() -> str:
    """A human-made password."""
    return "Tr0ub4dor&" + rand(string.digits, 3)
