"""Models for runtime tests: a scripted model whose stream stops half-way until released."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from contextree import Message
from contextree.models import ScriptedModel
from contextree.models._stream import Delta


class HeldModel(ScriptedModel):
    """Streams its scripted replies, but after ``hold_after`` deltas of a reply it waits
    (until ``release`` is set, at most 30 s); ``holding`` is set while it waits."""

    def __init__(self, *args: object, hold_after: int = 2, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.hold_after = hold_after
        self.holding = threading.Event()
        self.release = threading.Event()

    def _pieces(self, reply: Message) -> Iterator[Delta]:
        for i, delta in enumerate(super()._pieces(reply)):
            if i == self.hold_after:
                self.holding.set()
                self.release.wait(30)
            yield delta
