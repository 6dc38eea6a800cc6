"""What a model call cost: the provider's own figure when it reports one, else the price table.

Prices come from ``genai-prices`` (the table pydantic-ai uses), read from the installed
package: nothing is fetched at run time. It is an optional dependency (the ``prices`` extra,
also pulled in by the ``openai`` and ``anthropic`` extras); without it every price is
unknown. An unknown price is ``None``, never ``0.0``: a free call and an unpriced one are
different things, and the statistics say which is which.

``Usage.input`` excludes cached tokens (as both adapters report it), so the table is given the
whole prompt (input + cache reads + cache writes) with the cached parts named, and prices
cache reads and writes at their own rates.
"""

from __future__ import annotations

import functools
import math
import sys
from datetime import datetime
from typing import Any

from ._messages import Message, Usage

__all__ = ["PRICES_EXTRA", "cost_of", "price_source", "table_cost", "usd", "with_cost"]

PRICES_EXTRA = "prices"
"""The extra that installs the price table: ``pip install 'contextree[prices]'``."""

# Provider names people give adapters, as the price table spells them.
_PROVIDER_ALIASES = {
    "xai": "x-ai", "grok": "x-ai", "gemini": "google", "google-gla": "google",
    "google-vertex": "google", "vertexai": "google", "bedrock": "aws", "amazon": "aws",
    "azure-openai": "azure", "mistralai": "mistral", "moonshot": "moonshotai",
    "together-ai": "together", "togetherai": "together", "fireworks-ai": "fireworks",
}


def usd(amount: float) -> str:
    """An amount of USD for people: cents from $1 up (``$1.50``), three significant digits
    below (``$0.0156``, ``$0.000104``), so a small budget never reads ``$0.0001 > $0.0001``."""
    if amount < 0:
        return "-" + usd(-amount)
    if amount == 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount < 1e-6:
        return "<$0.000001"
    decimals = max(2, 2 - math.floor(math.log10(amount)))
    text = f"{amount:.{decimals}f}"
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


@functools.cache
def _table() -> Any:
    """The ``genai_prices`` module, or None when it is not installed."""
    try:
        import genai_prices
    except ImportError:
        return None
    return genai_prices


def _provider_id(provider: str) -> str:
    p = provider.strip().lower()
    return _PROVIDER_ALIASES.get(p, p)


@functools.lru_cache(maxsize=256)
def _known(provider: str, model: str) -> bool:
    """Whether the table has a price for ``model`` at ``provider`` (looked up once)."""
    table = _table()
    if table is None:
        return False
    try:
        table.calc_price(table.Usage(input_tokens=0, output_tokens=0), model,
                         provider_id=_provider_id(provider))
    except LookupError:
        return False
    return True


def table_cost(usage: Usage, provider: str | None, model: str | None, *,
               when: datetime | None = None) -> float | None:
    """The cost in USD of ``usage`` for ``model`` at ``provider`` by the installed price
    table (at the prices in force ``when``, default now), or None when the table does not
    know the model, the provider, or is not installed."""
    if not provider or not model or not _known(provider, model):
        return None
    table = _table()
    prompt = usage.input + usage.cache_read + usage.cache_write
    priced = table.Usage(input_tokens=prompt, output_tokens=usage.output,
                         cache_read_tokens=usage.cache_read,
                         cache_write_tokens=usage.cache_write)
    try:
        result = table.calc_price(priced, model, provider_id=_provider_id(provider),
                                  genai_request_timestamp=when)
    except (LookupError, ValueError):
        return None
    return float(result.total_price)


def cost_of(message: Message, *, when: datetime | None = None) -> float | None:
    """What the call that produced ``message`` cost: the cost its usage carries (the
    provider's, or filled from the table when the reply arrived; a reported ``0.0`` is
    free), else the table's price of its usage; None when neither is known. A message
    without usage, or whose usage bills no token, cost nothing: ``0.0``."""
    usage = message.usage
    if usage is None:
        return 0.0
    if usage.cost is not None:
        return usage.cost
    if not (usage.input or usage.output or usage.cache_read or usage.cache_write):
        return 0.0
    return table_cost(usage, message.provider, message.model, when=when)


def with_cost(message: Message, reported: float | None = None) -> Message:
    """``message`` with ``usage.cost`` filled: ``reported`` (the provider's own figure, ``0``
    included) when given, else the cost the usage already carries, else the table's price;
    unchanged when none is known."""
    usage = message.usage
    if usage is None:
        return message
    cost = reported if reported is not None else usage.cost
    if cost is None:
        cost = table_cost(usage, message.provider, message.model)
    if cost is None or cost == usage.cost:
        return message
    return message.replace(usage=usage.replace(cost=cost))


def price_source() -> str | None:
    """Where prices come from (``"genai-prices 0.2.3"``), or None when no table is
    installed. Read from the installed package's ``dist-info`` when the table is not loaded
    yet (importing it takes longer than ``contextree stats`` of a big session)."""
    if "genai_prices" not in sys.modules:
        version = _installed_version()
        if version is not None:
            return f"genai-prices {version}"
    table = _table()
    if table is None:
        return None
    return f"genai-prices {getattr(table, '__version__', '')}".strip()


def _installed_version() -> str | None:
    """The version of the ``genai_prices`` package found on the path, from the name of its
    ``genai_prices-VERSION.dist-info`` beside it, without importing it; None when there is
    not exactly one (the caller imports it then)."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    found = list(site.glob("genai_prices-*.dist-info"))
    if len(found) != 1:
        return None
    version = found[0].name[len("genai_prices-"):-len(".dist-info")]
    return version or None
