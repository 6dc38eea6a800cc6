"""``OpenAIResponses``: the OpenAI Responses API through the ``openai`` SDK, with its
compaction endpoint.

Message conversion is ``to_openai_responses`` / ``from_openai_responses`` (``wire_openai``);
this module calls ``responses.create`` and ``responses.compact`` and reads their bodies. A
streamed reply is read from the API's events by ``ResponsesAssembler``
(``_stream_responses``) into the body a completed one has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextree._messages import Message, Usage
from contextree._pricing import with_cost
from contextree.errors import CompactionError, ModelError
from contextree.models._base import ToolSpec, merge_options
from contextree.models._native import RESPONSES_API, NativeCompaction
from contextree.models._sdk import OpenAISdkModel
from contextree.models._stream import Assembler
from contextree.models._stream_responses import ResponsesAssembler
from contextree.models._wire_common import Json
from contextree.models._wire_openai import (
    from_openai_responses,
    to_openai_responses,
    tools_to_openai_responses,
)

__all__ = ["OpenAIResponses", "usage_from_openai_responses"]


def usage_from_openai_responses(usage: Mapping[str, Any] | None) -> Usage:
    """Responses usage; ``input`` excludes the cached tokens, reported apart."""
    if not usage:
        return Usage()
    details = usage.get("input_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    prompt = int(usage.get("input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    return Usage(input=max(prompt - cached, 0), output=output, cache_read=cached,
                 total=int(usage.get("total_tokens") or prompt + output))


class OpenAIResponses(OpenAISdkModel):
    """A model behind the OpenAI Responses API (``POST /responses``).

    System messages are sent as ``system`` input items where they are; ``default_options``
    (``reasoning``, ``max_output_tokens``, ``store``...) go to every request. The API key
    comes from ``api_key`` or ``OPENAI_API_KEY``; a local ``base_url`` needs none.
    ``compact_native`` calls ``POST /responses/compact`` (see ``ProviderCompaction``).
    """

    api_name = "OpenAI Responses API"

    min_native_tokens = 0
    """``/responses/compact`` has no documented minimum."""

    def _endpoint(self, client: Any) -> Any:
        return client.responses.create

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The keyword arguments for ``responses.create``."""
        opts = merge_options(self.default_options, options)
        if opts.pop("stream", None):
            raise ValueError("OpenAIResponses.complete does not stream; call "
                             "model.stream(...) for a streamed reply")
        request: dict[str, Any] = {"model": opts.pop("model", self.name),
                                   "input": to_openai_responses(messages)}
        if tools:
            request["tools"] = tools_to_openai_responses(tools)
        request.update(opts)
        return request

    def _assembler(self) -> Assembler:
        return ResponsesAssembler(self.provider)

    def _from_body(self, data: Json) -> Message:
        """The assistant message of the response's output items, with usage, model and
        status (``stop_reason``)."""
        output = data.get("output")
        if not isinstance(output, list):
            raise ModelError(f"{self.provider}: the response has no output list")
        replies = [m for m in from_openai_responses(output) if m.role == "assistant"]
        reply = replies[-1] if replies else Message.assistant("")
        return with_cost(reply.replace(
            usage=usage_from_openai_responses(data.get("usage")),
            model=data.get("model") or self.name, provider=self.provider,
            stop_reason=data.get("status")))

    def compact_native(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       instructions: str | None = None) -> NativeCompaction:
        """``POST /responses/compact`` on ``messages`` (system messages become the
        ``instructions``): the output items, all user messages then one encrypted
        ``compaction`` item, are what later requests send in their place (``tools``: the
        endpoint takes none; they are not sent). An answer
        without a compaction item raises ``CompactionError``; a refused call (a server
        without the endpoint answers 404) raises ``ModelError``."""
        system = [m.text for m in messages if m.role == "system" and m.kind is None and m.text]
        if instructions:
            system.append(instructions)
        rest = [m for m in messages if not (m.role == "system" and m.kind is None)]
        request: dict[str, Any] = {"model": self.name, "input": to_openai_responses(rest)}
        if system:
            request["instructions"] = "\n\n".join(system)
        data = self._call_json(lambda client: client.responses.compact, request)
        output = data.get("output")
        items = [dict(i) for i in output if isinstance(i, dict)] if isinstance(output,
                                                                               list) else []
        found = [i for i in items if i.get("type") == "compaction"
                 and isinstance(i.get("encrypted_content"), str) and i["encrypted_content"]]
        if len(found) != 1:
            raise CompactionError(f"{self.provider}: /responses/compact returned "
                                  f"{len(found)} compaction items (one was expected)")
        usage = usage_from_openai_responses(data.get("usage"))
        priced = with_cost(Message.assistant("", usage=usage, model=self.name,
                                             provider=self.provider)).usage
        return NativeCompaction(self.provider, RESPONSES_API,
                                str(data.get("model") or self.name), items, None,
                                priced or usage)
