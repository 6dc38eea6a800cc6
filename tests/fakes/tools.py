"""A tool for runtime tests whose result is known: the weather in a city."""

from __future__ import annotations

import contextree as ct


@ct.tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"sunny in {city}"
