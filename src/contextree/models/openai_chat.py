"""``OpenAIChat``: the Chat Completions API through the ``openai`` SDK.

Works with OpenAI and the many servers that speak the same protocol (vLLM, Ollama,
llama.cpp server, OpenRouter, DeepSeek...) via ``base_url``. Message conversion lives in
``wire_openai``; this module only calls the SDK and maps its errors to ``ModelError``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import msgspec

from contextree.errors import ModelError, missing_extra
from contextree.messages import Message
from contextree.models.base import (
    ToolSpec,
    is_local_url,
    map_sdk_error,
    merge_options,
    sdk_kwargs,
)
from contextree.models.wire_openai import (
    assistant_from_openai_chat,
    to_openai_chat,
    tools_to_openai_chat,
    usage_from_openai_chat,
)

if TYPE_CHECKING:
    import openai

__all__ = ["LOCAL_API_KEY", "OpenAIChat"]

LOCAL_API_KEY = "not-needed"
"""The key sent to a local server (localhost, a private address) when none is configured."""


class OpenAIChat:
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
        try:
            import openai
        except ImportError:
            raise missing_extra("openai", "openai") from None
        self._sdk: Any = openai
        self.name = model
        self.provider = provider
        self.reasoning_field = reasoning_field
        self.default_options: dict[str, Any] = dict(default_options)
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if key is None and is_local_url(base_url):
            key = LOCAL_API_KEY
        self._client_args: dict[str, Any] = {"api_key": key, "base_url": base_url, "max_retries": 0}
        if client is None and async_client is not None:  # same settings as the given one
            self._client_args.update(api_key=async_client.api_key, base_url=async_client.base_url)
        self._client = client or self._make_client(openai.OpenAI)
        self._async_client = async_client
        self._async_clients: WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            WeakKeyDictionary()
        )
        self.base_url = str(self._client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    def _make_client(self, cls: Any) -> Any:
        try:
            return cls(**self._client_args)
        except self._sdk.OpenAIError as e:
            raise ModelError(
                f"{self.provider}: cannot create the client: {e} "
                "(pass api_key= or set OPENAI_API_KEY)"
            ) from e

    def _aclient(self) -> openai.AsyncOpenAI:
        """The async client: ``async_client``, or one per event loop (an async HTTP client
        cannot outlive its loop, e.g. across ``asyncio.run`` calls) made with the sync
        client's key and base_url; pass ``async_client`` to control headers or transport."""
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            self._client_args.update(api_key=self._client.api_key, base_url=self._client.base_url)
            client = self._async_clients[loop] = self._make_client(self._sdk.AsyncOpenAI)
        return client

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """One chat completion; returns the assistant message with usage and stop_reason."""
        request = self._request(messages, tools, options)
        try:
            create = self._client.chat.completions.create
            response = create(**sdk_kwargs(create, request))
        except self._sdk.OpenAIError as e:
            raise map_sdk_error(self.provider, e, self._sdk, self.base_url) from e
        return self._parse(response)

    async def acomplete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Async ``complete`` (``openai.AsyncOpenAI``)."""
        request = self._request(messages, tools, options)
        try:
            acreate = self._aclient().chat.completions.create
            response = await acreate(**sdk_kwargs(acreate, request))
        except self._sdk.OpenAIError as e:
            raise map_sdk_error(self.provider, e, self._sdk, self.base_url) from e
        return self._parse(response)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        opts = merge_options(self.default_options, options)
        if opts.get("stream"):
            raise ValueError("OpenAIChat does not stream; drop the 'stream' option")
        request: dict[str, Any] = {
            "model": opts.pop("model", self.name),
            "messages": to_openai_chat(messages, reasoning_field=self.reasoning_field),
        }
        if tools:
            request["tools"] = tools_to_openai_chat(tools)
        request.update(opts)
        return request

    def _parse(self, response: Any) -> Message:
        """The assistant message of the first choice, with usage, model and stop_reason."""
        data: dict[str, Any] = response.to_dict(mode="json")
        choices = data.get("choices") or []
        if not choices:
            raise self._no_choices(data)
        choice = choices[0]
        msg = assistant_from_openai_chat(choice.get("message") or {})
        return msgspec.structs.replace(
            msg,
            usage=usage_from_openai_chat(data.get("usage")),
            model=data.get("model") or self.name,
            provider=self.provider,
            stop_reason=choice.get("finish_reason"),
        )

    def _no_choices(self, data: Mapping[str, Any]) -> ModelError:
        """Some compatible servers answer 200 with an ``error`` object instead of choices."""
        err = data.get("error")
        if isinstance(err, Mapping):
            code = err.get("code")
            status = code if isinstance(code, int) else None
            retryable = status is not None and (status == 429 or status >= 500)
            detail = err.get("message") or err
            return ModelError(f"{self.provider}: {detail}", status=status, retryable=retryable)
        return ModelError(f"{self.provider}: the response has no choices: {dict(data)!r:.300}")
