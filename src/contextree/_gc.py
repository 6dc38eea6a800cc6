"""``gc_paused``: the cyclic collector paused while many acyclic objects are made at once."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused(*, untraversed: bool = False) -> Iterator[None]:
    """Pause the cyclic collector while many acyclic objects are made (decoded entries, an
    index's columns, a view): a collector running as the heap grows would traverse the same
    new objects again and again.

    ``untraversed``: what was made meanwhile (and every other young object of the process)
    goes to the oldest generation without a pass over it (``gc.freeze`` then
    ``gc.unfreeze``): a view of 50,000 entries is ~400,000 containers, and the
    young-generation pass that re-enabling the collector starts would walk them all
    (0.14 s) to free nothing."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if untraversed:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
