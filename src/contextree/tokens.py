"""Token counting: how much of the model's window a conversation fills.

Two counters share one interface: :class:`EstimateCounter` (offline, fast, no dependencies)
and :class:`TiktokenCounter` (exact for OpenAI tokenizers, optional extra ``tiktoken``).
:func:`count_context` is the number compaction decides on: anchored (:func:`usage_anchor`,
the one place that decides whether reported usage describes a context) on the usage the
provider reported for the last call, so only messages added since then are estimated.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from contextree._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
from contextree.errors import ContextreeError, missing_extra
from contextree.markers import COMPACTED, ClearedToolResultMarker, CompactionSummaryMarker

__all__ = [
    "ContextCount",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_context",
    "fresh_start",
    "measure_context",
    "usage_anchor",
    "usage_scale",
]

IMAGE_TOKENS = 1200
MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 3

@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and of messages as a provider would bill them (roughly)."""

    def count_text(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def count_message(self, msg: Message) -> int:
        """Tokens one message costs in a request, framing included."""
        ...

    def count_messages(self, msgs: Sequence[Message]) -> int:
        """Tokens of a list of messages."""
        ...


def _json(value: Any) -> str:
    """Compact JSON for counting; values orjson cannot encode are written with ``str``."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


class MessageCounter(ABC):
    """Counts messages from ``count_text``: content, thinking, tool calls, images, overhead."""

    def __init__(
        self, *, image_tokens: int = IMAGE_TOKENS, message_overhead: int = MESSAGE_OVERHEAD
    ) -> None:
        if image_tokens < 0 or message_overhead < 0:
            raise ValueError(
                "image_tokens and message_overhead must be >= 0, "
                f"got {image_tokens!r} and {message_overhead!r}"
            )
        self.image_tokens = image_tokens
        self.message_overhead = message_overhead

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens in ``text``."""

    def count_message(self, msg: Message) -> int:
        """Tokens one message costs in a request, including role and framing overhead."""
        total = self.message_overhead
        count_text = self.count_text
        content = msg.content
        if isinstance(content, str):
            total += count_text(content)
        elif content is not None:
            total += sum(self._count_part(part) for part in content)
        calls = msg.tool_calls
        if calls:
            for call in calls:
                total += self._count_call(call)
        if msg.name:
            total += count_text(msg.name)
        return total

    def count_messages(self, msgs: Sequence[Message]) -> int:
        """Tokens of a list of messages."""
        return sum(self.count_message(m) for m in msgs)

    def _count_part(self, part: object) -> int:
        if isinstance(part, TextPart):
            return self.count_text(part.text)
        if isinstance(part, ThinkingPart):
            return self.count_text(part.thinking)
        if isinstance(part, ImagePart):
            return self.image_tokens
        if isinstance(part, UnknownPart):
            return self.count_text(_json(part.data))
        return 0

    def _count_call(self, call: ToolCall) -> int:
        return (
            TOOL_CALL_OVERHEAD + self.count_text(call.name) + self.count_text(_json(call.arguments))
        )


# -- the estimator ------------------------------------------------------------------------

# Each UTF-8 byte is mapped to a class byte, then each class is counted with bytes.count.
_WORD, _DIGIT, _PUNCT, _CONT, _LEAD2, _LEAD3, _LEAD4 = b"wdpc234"


def _byte_class(b: int) -> int:
    if b < 0x80:
        ch = chr(b)
        if ch.isalpha() or ch in " \t\n\r":
            return _WORD
        return _DIGIT if ch.isdigit() else _PUNCT
    if b < 0xC0:
        return _CONT
    if b < 0xE0:
        return _LEAD2
    return _LEAD3 if b < 0xF0 else _LEAD4


_CLASSES = bytes(_byte_class(b) for b in range(256))
_SHORT_TEXT = 160  # texts up to this long have their estimates remembered...
_SHORT_MEMO = 65_536  # ...this many per counter (then forgotten all at once)


class EstimateCounter(MessageCounter):
    """A fast offline estimate that knows scripts and code do not all cost 4 chars/token.

    Per character: ASCII letters and whitespace ~1/4 token, digits 1/3 (tokenizers group
    them by three), ASCII punctuation and symbols 2/3 (code and JSON are dense), two-byte
    UTF-8 characters (Latin accents, Cyrillic, Greek, Arabic, Hebrew) 1/2, three-byte ones
    (CJK, Hangul, Indic, Thai) 1, four-byte ones (emoji, rare CJK) 3/2. The classes are
    counted on the UTF-8 bytes with ``translate`` and ``count``, never a Python loop per
    character, so megabytes take milliseconds.
    """

    word_weight = 1 / 4
    digit_weight = 1 / 3
    punct_weight = 2 / 3
    lead2_weight = 1 / 2
    lead3_weight = 1.0
    lead4_weight = 3 / 2

    # Short texts recur (tool names, small arguments, one-line outputs): their estimates are
    # remembered per counter, a dict lookup instead of an encode and five counts.
    _short: dict[str, int] | None = None

    def count_text(self, text: str) -> int:
        """Estimated tokens in ``text`` (0 for the empty string)."""
        if not text:
            return 0
        if len(text) <= _SHORT_TEXT:
            short = self._short
            if short is None:
                short = self._short = {}
            n = short.get(text)
            if n is None:
                n = self._estimate(text)
                if len(short) >= _SHORT_MEMO:
                    short.clear()
                short[text] = n
            return n
        return self._estimate(text)

    def _estimate(self, text: str) -> int:
        data = text.encode("utf-8", "surrogatepass")
        classes = data.translate(_CLASSES)
        digits = classes.count(_DIGIT)
        punct = classes.count(_PUNCT)
        lead2 = lead3 = lead4 = 0
        if not text.isascii():
            lead2 = classes.count(_LEAD2)
            lead3 = classes.count(_LEAD3)
            lead4 = classes.count(_LEAD4)
        words = len(data) - digits - punct - 2 * lead2 - 3 * lead3 - 4 * lead4
        estimate = (
            max(words, 0) * self.word_weight
            + digits * self.digit_weight
            + punct * self.punct_weight
            + lead2 * self.lead2_weight
            + lead3 * self.lead3_weight
            + lead4 * self.lead4_weight
        )
        return max(1, math.ceil(estimate))


# -- tiktoken -----------------------------------------------------------------------------


class TiktokenCounter(MessageCounter):
    """Exact counts with a tiktoken encoding (``pip install 'contextree[tiktoken]'``).

    The encoding is loaded when the counter is made; tiktoken downloads it on first use, so
    offline this raises ``ContextreeError`` unless ``TIKTOKEN_CACHE_DIR`` holds it.
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        image_tokens: int = IMAGE_TOKENS,
        message_overhead: int = MESSAGE_OVERHEAD,
    ) -> None:
        super().__init__(image_tokens=image_tokens, message_overhead=message_overhead)
        try:
            import tiktoken
        except ImportError as exc:
            raise missing_extra("tiktoken", "tiktoken") from exc
        try:
            self._encoding = tiktoken.get_encoding(encoding)
        except OSError as exc:
            raise ContextreeError(
                f"could not load the tiktoken encoding {encoding!r} "
                f"({type(exc).__name__}: {exc}); tiktoken downloads it on first use: connect "
                "once, or set TIKTOKEN_CACHE_DIR to a directory that holds it"
            ) from exc
        self.encoding = encoding

    def count_text(self, text: str) -> int:
        """Tokens in ``text``; special-token strings are counted as plain text."""
        if not text:
            return 0
        return len(self._encoding.encode_ordinary(text))


# -- the count that drives compaction -----------------------------------------------------


def _usable(msg: Message) -> bool:
    usage = msg.usage
    return msg.role == "assistant" and usage is not None and usage.context_tokens > 0


def fresh_start(messages: Sequence[Message]) -> int:
    """Where reported usage starts to describe ``messages`` when nobody recorded it.

    A list that holds a compaction marker (a summary, a cleared result) was compacted at a
    point nothing recorded, so none of its usage describes it: ``len(messages)``. Otherwise
    every message is as the provider saw it: ``0``.
    """
    if any(m.kind in COMPACTED for m in messages):
        return len(messages)
    return 0


def usage_anchor(messages: Sequence[Message], fresh_from: int | None = None) -> int | None:
    """The index of the message whose reported usage describes ``messages``, or ``None``.

    The one rule for every counter (context building, compaction, the runtime, the CLI): the
    last assistant message with usable usage, provided it sits at index ``fresh_from`` or
    later. Messages before ``fresh_from`` were produced before the latest compaction, so
    their usage describes a context that no longer exists. ``None`` (not recorded):
    :func:`fresh_start` decides from the markers in the list.
    """
    start = fresh_start(messages) if fresh_from is None else fresh_from
    for i in range(len(messages) - 1, -1, -1):
        if _usable(messages[i]):
            return i if i >= start else None
    return None


@dataclass(frozen=True)
class ContextCount:
    """The one count of a context (:func:`measure_context`): the tokens the next request
    sends, the plain estimate of the same messages, and what the count rests on.

    ``basis`` is ``"reported"`` (the provider's usage at message ``anchor`` plus estimates
    after it), ``"compaction"`` (the latest compaction's own count of the view it made, which
    carries the provider scale, plus estimates after it) or ``"estimate"``. ``scale`` is
    ``tokens / estimate``: the ratio the planner multiplies its estimates by.
    """

    tokens: int
    estimate: int | None
    basis: str
    anchor: int | None = None

    @property
    def scale(self) -> float:
        """How much the count differs from the plain estimate (see :func:`usage_scale`);
        ``1.0`` when the estimate was not asked for."""
        return usage_scale(self.tokens, self.estimate or 0)


def _carried(messages: Sequence[Message], start: int) -> int | None:
    """The compaction's count of the view it made (``tokens_after``), as the markers before
    ``start`` carry it: the last compaction summary's, else (a compaction without a summary)
    the last cleared tool result's; ``None`` when none carries one."""
    cleared: int | None = None
    for i in range(min(start, len(messages)) - 1, -1, -1):
        if messages[i].kind not in COMPACTED:
            continue
        mark = messages[i].marker
        if isinstance(mark, CompactionSummaryMarker):
            return mark.tokens_after
        if cleared is None and isinstance(mark, ClearedToolResultMarker):
            cleared = mark.tokens_after
    return cleared


def measure_context(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    fresh_from: int | None = None,
    compacted: int | None = None,
    estimate: bool = False,
    carry: bool = True,
) -> ContextCount:
    """The tokens the next request will send: the ONE count behind every decision to
    compact (the planner, ``show --context``, ``compact``, the runtime trigger and the
    integrations), before and after a compaction.

    1. Anchored on :func:`usage_anchor`: the prompt and output the provider reported for that
       call plus an estimate of the messages after it.
    2. Else, after a compaction (messages before ``fresh_from`` are the view it made): the
       count the compaction recorded for that view (``compacted``, else the ``tokens_after``
       its markers carry) plus an estimate of what came after, just as
       reported usage counts everything up to its message.
       The compaction counted its view with the provider scale, so the scale is carried
       across it.
    3. Else the estimate of all messages.

    ``carry=False`` skips step 2: where the compacted view ends is not known (a list whose
    ``fresh_from`` nobody recorded may have grown since). ``estimate``: also estimate every message (``ContextCount.estimate``, for the scale);
    an anchored count otherwise estimates only the messages after its anchor.
    """
    start = fresh_start(messages) if fresh_from is None else fresh_from
    anchor = usage_anchor(messages, start)
    if anchor is not None:
        usage = messages[anchor].usage
        assert usage is not None  # checked by usage_anchor
        reported = usage.input + usage.cache_read + usage.cache_write + usage.output
        after = counter.count_messages(messages[anchor + 1 :])
        total = counter.count_messages(messages) if estimate else None
        return ContextCount(reported + after, total, "reported", anchor)
    start = min(start, len(messages))
    if start > 0 and carry:
        if compacted is None:
            compacted = _carried(messages, start)
        if compacted is not None:
            after = counter.count_messages(messages[start:])
            total = counter.count_messages(messages) if estimate else None
            return ContextCount(compacted + after, total, "compaction")
    total = counter.count_messages(messages)
    return ContextCount(total, total, "estimate")


def count_context(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    fresh_from: int | None = None,
    compacted: int | None = None,
) -> int:
    """Tokens the next request will send: ``measure_context(...).tokens``."""
    return measure_context(messages, counter, fresh_from=fresh_from,
                           compacted=compacted).tokens


def usage_scale(reported: int, estimate: int) -> float:
    """How much the provider's count differs from the estimate: ``reported / estimate``.

    Compaction scales every estimate by it, whether the provider counts more (a tokenizer
    that splits code finer, or a system prompt and tool definitions outside the messages) or
    less, so the context it plans lands where the provider will count it. ``1.0`` when there
    is nothing to compare.
    """
    if reported <= 0 or estimate <= 0:
        return 1.0
    return reported / estimate
