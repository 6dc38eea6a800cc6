"""The model a command talks to, named the same way by every command that takes one.

``--model [PROVIDER:]MODEL`` (default ``$CONTEXTREE_MODEL``) and ``--base-url URL`` (default
``$CONTEXTREE_BASE_URL``, else the provider's own ``OPENAI_BASE_URL`` or
``ANTHROPIC_BASE_URL``). PROVIDER is ``openai`` (any OpenAI-compatible server),
``anthropic``, or ``responses`` (OpenAI's Responses API); a bare MODEL is Anthropic's when ``ANTHROPIC_API_KEY`` or
``ANTHROPIC_BASE_URL`` is set and ``OPENAI_BASE_URL`` is not, else OpenAI-compatible. API
keys come from the providers' variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ..models._base import Model
from .output import UsageProblem

MODEL_ENV = "CONTEXTREE_MODEL"
BASE_URL_ENV = "CONTEXTREE_BASE_URL"
PROVIDERS = ("openai", "anthropic", "responses")

ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", envvar=MODEL_ENV, metavar="[PROVIDER:]MODEL", show_default=False,
    help="The model: openai:NAME (any OpenAI-compatible server), anthropic:NAME or "
    "responses:NAME (OpenAI's Responses API); a bare "
    "NAME is Anthropic's when $ANTHROPIC_API_KEY or $ANTHROPIC_BASE_URL is set (and "
    "$OPENAI_BASE_URL is not), else OpenAI-compatible.")]
BaseUrlOpt = Annotated[str | None, typer.Option(
    "--base-url", envvar=BASE_URL_ENV, metavar="URL", show_default=False,
    help="The model's server (default: the provider's $OPENAI_BASE_URL or "
    "$ANTHROPIC_BASE_URL).")]


def parse_model(spec: str) -> tuple[str, str]:
    """``(provider, name)`` for ``[PROVIDER:]MODEL``; a usage problem naming the fix for an
    unknown provider or a missing name."""
    provider, sep, name = spec.strip().partition(":")
    if not sep:
        env = os.environ
        anthropic = ((env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_BASE_URL"))
                     and not env.get("OPENAI_BASE_URL"))
        return ("anthropic" if anthropic else "openai"), spec.strip()
    if provider not in PROVIDERS:
        raise UsageProblem(f"--model {spec!r}: unknown provider {provider!r} (openai, "
                           "anthropic or responses; OpenAI-compatible servers use openai: and --base-url; "
                           f"a model name with a colon is written openai:{spec})")
    if not name:
        raise UsageProblem(f"--model {spec!r}: name the model, e.g. {provider}:"
                           + ("claude-haiku-4-5" if provider == "anthropic" else "gpt-4o-mini"))
    return provider, name


def make_model(spec: str | None, base_url: str | None,
               recorded: tuple[str, str] | None = None) -> Model | None:
    """The model ``--model`` names, else the one a session ``recorded`` (provider, name),
    else ``None``."""
    if spec:
        provider, name = parse_model(spec)
    elif recorded is not None:
        provider, name = recorded
    else:
        return None
    if provider == "anthropic":
        from ..models import AnthropicMessages

        return AnthropicMessages(name, base_url=base_url)
    if provider == "responses":
        from ..models import OpenAIResponses

        return OpenAIResponses(name, base_url=base_url)
    from ..models import OpenAIChat

    return OpenAIChat(name, base_url=base_url, provider=provider)
