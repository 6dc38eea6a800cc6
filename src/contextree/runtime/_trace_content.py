"""The message content a trace records (``Tracing(capture_content=True)``), redacted.

Traces are an exit like an export: a span's attributes go to a collector, a vendor, a
dashboard. So the content a trace records passes through the one redaction step first
(``contextree.redaction.Redactor``: ``[REDACTED:aws-key:1]`` for a key), unless
``redact=False``. A model call records its whole context; each message is redacted once
(kept by identity, a bounded number of them), so a long session does not redact its
history again at every call.
"""

from __future__ import annotations

from typing import Any

import orjson

from .._messages import Message
from ..redaction import Redactor

__all__ = ["CapturedContent"]

_KEPT = 4096  # redacted messages kept for the next calls (a context's worth)


class CapturedContent:
    """Texts, messages and values as a trace records them: redacted by ``redact``
    (``True``: the default redactor, made on first use; ``False``: as they are; or a
    ``Redactor`` of your own)."""

    def __init__(self, redact: bool | Redactor = True) -> None:
        self._given = redact
        self._redactor: Redactor | None = redact if isinstance(redact, Redactor) else None
        self._done: dict[int, tuple[Message, dict[str, Any]]] = {}

    @property
    def redactor(self) -> Redactor:
        """The redactor (made on first use: a trace without content never needs one)."""
        if self._redactor is None:
            self._redactor = Redactor(enabled=bool(self._given))
        return self._redactor

    def text(self, text: str) -> str:
        """``text`` redacted."""
        return self.redactor.text(text)

    def json(self, value: Any) -> str:
        """``value`` redacted, as JSON."""
        return orjson.dumps(self.redactor.value(value), default=str).decode()

    def messages_json(self, messages: Any) -> str:
        """The messages of ``messages`` (other items are skipped) redacted, as a JSON
        list of their dicts."""
        items = [m for m in messages if isinstance(m, Message)]
        new = [m for m in items if self._done.get(id(m), (None,))[0] is not m]
        if new:
            if len(self._done) + len(new) > _KEPT:
                self._done.clear()
                new = items
            for m, shown in zip(new, self.redactor.messages(new), strict=True):
                self._done[id(m)] = (m, shown.to_dict())
        return orjson.dumps([self._done[id(m)][1] for m in items]).decode()
