"""``ScriptedModel``: a model that replays prepared replies, for tests and examples.

It behaves like a real adapter (assistant messages with usage, model, provider and
stop_reason; ``ModelError`` on failure) without a network, so agent loops, compaction and
retries can be tested deterministically.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from contextree._messages import Message, Usage
from contextree.errors import ModelError
from contextree.models._base import Model, ToolSpec
from contextree.models._stream import (
    Delta,
    DeltaAssembler,
    ReplyStream,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    deltas_of,
    message_of_body,
)

__all__ = ["Reply", "ScriptedModel", "estimate_tokens"]

Reply = Message | str | BaseException | Callable[[Sequence[Message]], Message | str]
"""One scripted reply: a message, text, an exception to raise, or a function of the input."""


def estimate_tokens(data: object) -> int:
    """A rough token count: a quarter of the JSON length (at least 1)."""
    return max(1, len(msgspec.json.encode(data)) // 4)


class ScriptedModel(Model):
    """Replays ``replies`` in order, one per call; records each call's input in ``calls``.

    A ``str`` reply becomes an assistant text message; a callable gets the call's messages and
    returns the reply (so a test can react to the input); an exception instance is raised
    (e.g. a retryable ``ModelError``). Replies get an estimated ``usage`` unless they carry one.
    ``stream`` replays a reply as deltas of ``chunk`` characters.
    """

    provider: str = "scripted"

    def __init__(self, replies: Iterable[Reply], name: str = "scripted", *,
                 chunk: int = 16) -> None:
        self.name = name
        self.chunk = max(1, chunk)
        self._replies: Iterator[Reply] = iter(replies)
        self.calls: list[list[Message]] = []
        self.tools: list[list[dict[str, Any]]] = []
        self.options: list[dict[str, Any]] = []

    def add(self, *replies: Reply) -> None:
        """Queue more replies after the remaining ones."""
        self._replies = itertools.chain(self._replies, replies)

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Record the call and return the next scripted reply."""
        self.calls.append(list(messages))
        self.tools.append([dict(t) for t in tools])
        self.options.append(dict(options))
        try:
            reply = next(self._replies)
        except StopIteration:
            n = len(self.calls) - 1
            raise ModelError(
                f"ScriptedModel ran out of replies after {n} calls; give it more replies"
            ) from None
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        return self._finish(reply, messages, tools)

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ReplyStream:
        """The next scripted reply as a stream: its thinking and text in pieces of ``chunk``
        characters, then its tool calls."""
        reply = self.complete(messages, tools=tools, **options)
        return ReplyStream(self._pieces(reply), DeltaAssembler(reply), message_of_body,
                           errors=lambda e, started: None, provider=self.provider)

    def _pieces(self, reply: Message) -> Iterator[Delta]:
        n = self.chunk
        for delta in deltas_of(reply):
            if isinstance(delta, ToolCallReady):
                yield delta
                continue
            kind = TextDelta if isinstance(delta, TextDelta) else ThinkingDelta
            for i in range(0, len(delta.text), n):
                yield kind(delta.text[i:i + n])

    async def acomplete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Async ``complete``: the same replies, in the same order."""
        return self.complete(messages, tools=tools, **options)

    def _finish(
        self, reply: Message | str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Message:
        msg = Message.assistant(reply) if isinstance(reply, str) else reply
        usage = msg.usage or self._usage(msg, messages, tools)
        stop = msg.stop_reason or ("tool_use" if msg.tool_calls else "end_turn")
        return msg.replace(
            usage=usage,
            model=msg.model or self.name,
            provider=msg.provider or self.provider,
            stop_reason=stop,
        )

    @staticmethod
    def _usage(
        msg: Message, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]
    ) -> Usage:
        # (``meta`` is contextree's own and never sent, so it is not counted)
        prompt: list[Any] = [m.replace(meta=None).to_dict() for m in messages]
        if tools:
            prompt.append([dict(t) for t in tools])
        inp = estimate_tokens(prompt)
        reply = msg.replace(usage=None, meta=None).to_dict()
        out = estimate_tokens({"content": reply.get("content"), "calls": reply.get("tool_calls")})
        return Usage(input=inp, output=out, total=inp + out)
