"""``OpenAIChat``: the Chat Completions API through the ``openai`` SDK.

Works with OpenAI and the many servers that speak the same protocol (vLLM, Ollama,
llama.cpp server, OpenRouter, DeepSeek...) via ``base_url``. Message conversion lives in
``wire_openai``; this module only calls the SDK and maps its errors to ``ModelError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contextree._messages import Message
from contextree._pricing import with_cost
from contextree._text import shorten
from contextree.errors import ModelError, model_error_for_status
from contextree.models._base import ToolSpec, merge_options
from contextree.models._sdk import LOCAL_API_KEY, OpenAISdkModel
from contextree.models._stream import Assembler, ChatAssembler
from contextree.models._wire_common import Json
from contextree.models._wire_openai import (
    assistant_from_openai_chat,
    to_openai_chat,
    tools_to_openai_chat,
    usage_from_openai_chat,
)

if TYPE_CHECKING:
    import openai

__all__ = ["LOCAL_API_KEY", "OpenAIChat"]

class OpenAIChat(OpenAISdkModel):
    """A chat model behind an OpenAI-compatible Chat Completions endpoint.

    ``default_options`` (``temperature``, ``max_completion_tokens``, ``reasoning_effort``,
    ``extra_body``...) go to every request; per-call options override them. Options the
    installed SDK does not name are sent in ``extra_body``. The API key comes from ``api_key``
    or ``OPENAI_API_KEY``; a local ``base_url`` needs none. The SDK does not retry
    (``max_retries=0``): failures raise ``ModelError`` saying whether to retry.

    ``reasoning_field``: send earlier assistant thinking back in this message field (e.g.
    ``"reasoning_content"`` for DeepSeek or vLLM); by default thinking is not sent. Thinking
    the server returns (``reasoning_content`` or ``reasoning``) is always read.
    """

    api_name = "OpenAI Chat Completions API"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        reasoning_field: str | None = None,
        **default_options: Any,
    ) -> None:
        self.reasoning_field = reasoning_field
        super().__init__(model, base_url=base_url, api_key=api_key, client=client,
                         async_client=async_client, provider=provider, **default_options)

    def _endpoint(self, client: Any) -> Any:
        return client.chat.completions.create

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        opts = merge_options(self.default_options, options)
        if opts.pop("stream", None):
            raise ValueError("OpenAIChat.complete does not stream; call model.stream(...) "
                             "for a streamed reply")
        request: dict[str, Any] = {
            "model": opts.pop("model", self.name),
            "messages": to_openai_chat(messages, reasoning_field=self.reasoning_field),
        }
        if tools:
            request["tools"] = tools_to_openai_chat(tools)
        request.update(opts)
        return request

    def _stream_request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A streamed request asks for the usage in the last chunk."""
        request = super()._stream_request(messages, tools, options)
        request["stream_options"] = {"include_usage": True, **(request.get("stream_options")
                                                                or {})}
        return request

    def _assembler(self) -> Assembler:
        return ChatAssembler()

    def _from_body(self, data: Json) -> Message:
        """The assistant message of the first choice, with usage (and its cost: the one the
        server reports, as OpenRouter does, else the price table's), model and stop_reason."""
        choices = data.get("choices") or []
        if not choices:
            raise self._no_choices(data)
        choice = choices[0]
        msg = assistant_from_openai_chat(choice.get("message") or {})
        usage = data.get("usage")
        msg = msg.replace(
            usage=usage_from_openai_chat(usage),
            model=data.get("model") or self.name,
            provider=self.provider,
            stop_reason=choice.get("finish_reason"),
        )
        reported = usage.get("cost") if isinstance(usage, Mapping) else None
        if isinstance(reported, bool) or not isinstance(reported, int | float):
            reported = None
        return with_cost(msg, None if reported is None else float(reported))

    def _no_choices(self, data: Mapping[str, Any]) -> ModelError:
        """Some compatible servers answer 200 with an ``error`` object instead of choices."""
        err = data.get("error")
        if isinstance(err, Mapping):
            code = err.get("code")
            status = code if isinstance(code, int) else None
            detail = err.get("message") or err
            return model_error_for_status(status)(f"{self.provider}: {detail}", status=status)
        return ModelError(f"{self.provider}: the response has no choices: "
                          f"{shorten(repr(dict(data)), 300)}")
