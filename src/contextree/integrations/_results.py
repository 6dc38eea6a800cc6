"""A framework's tool result made fit for the model and the session, the same in every
integration: each lone surrogate (a file name ``os.listdir`` could not decode, half of a cut
emoji) replaced by U+FFFD, which UTF-8 can hold, and the result cut to the truncation limits
with the whole of it saved to the overflow store and a hint the model can follow to read it,
as the runtime's tool pipeline does for its own tools."""

from __future__ import annotations

import re

from .._messages import valid_text
from .._overflow import OverflowStore
from .._truncation import LIMITS, Direction, Truncation, TruncationLimits, truncate

__all__ = ["bounded_result"]


def bounded_result(text: str, *, store: OverflowStore | None = None,
                   session_id: str | None = None, label: str = "output",
                   limits: TruncationLimits = LIMITS,
                   direction: Direction = "head") -> Truncation:
    """``text`` (a tool's output) as the model should see it: valid UTF-8 and within
    ``limits``; when it is cut, ``Truncation.saved_path`` is where the whole output went
    (``store``, default the per-user store) and ``Truncation.meta()`` what to keep beside it.
    Text that fits, with no surrogate, is returned as it is (``truncated`` False).

    Surrogates that stand for undecodable bytes (``surrogateescape``, as ``os.listdir`` and
    ``subprocess`` with ``errors="surrogateescape"`` give) are those bytes again in the
    saved file, so the whole output is what the tool read; other lone surrogates (half a cut
    emoji) are saved as U+FFFD."""
    data: str | bytes = text
    if _SURROGATE.search(text) is not None:
        try:
            data = text.encode("utf-8", "surrogateescape")  # the preview shows U+FFFD
        except UnicodeEncodeError:
            data = valid_text(text)
    return truncate(data, store=store, session_id=session_id, label=label,
                    max_lines=limits.max_lines, max_bytes=limits.max_bytes,
                    max_line_chars=limits.max_line_chars, direction=direction)


_SURROGATE = re.compile("[\ud800-\udfff]")
