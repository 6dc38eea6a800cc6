"""``AnthropicMessages``: the Anthropic Messages API through the ``anthropic`` SDK.

Message conversion lives in ``wire_anthropic`` (system messages -> ``system``, tool results
merged per turn, thinking signatures sent back verbatim); this module only calls the SDK and
maps its errors to ``ModelError``.
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
from contextree.models.wire_anthropic import (
    SYSTEM_SEPARATOR,
    assistant_from_anthropic,
    to_anthropic,
    tools_to_anthropic,
    usage_from_anthropic,
)

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicMessages"]

_LOCAL_API_KEY = "not-needed"


class AnthropicMessages:
    """A Claude model (or an Anthropic-compatible server) behind the Messages API.

    ``default_options`` (``temperature``, ``thinking``, ``tool_choice``...) go to every
    request; per-call options override them. Options the installed SDK does not name are sent
    in ``extra_body``. A ``system`` option is put before the text of the system messages. The
    API key comes from ``api_key`` or ``ANTHROPIC_API_KEY`` (else the SDK's own discovery); a
    local ``base_url`` needs none. The SDK does not retry (``max_retries=0``): failures raise
    ``ModelError`` saying whether to retry.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: anthropic.Anthropic | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        provider: str = "anthropic",
        **default_options: Any,
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise missing_extra("anthropic", "anthropic") from None
        self._sdk: Any = anthropic
        self.name = model
        self.provider = provider
        self.max_tokens = max_tokens
        self.default_options: dict[str, Any] = dict(default_options)
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        if key is None and is_local_url(base_url):
            key = _LOCAL_API_KEY
        self._client_args: dict[str, Any] = {"max_retries": 0}
        if key is not None:
            self._client_args["api_key"] = key
        if base_url is not None:
            self._client_args["base_url"] = base_url
        if client is None and async_client is not None:  # same settings as the given one
            self._client_args.update(api_key=async_client.api_key, base_url=async_client.base_url)
        self._client = client or self._make_client(anthropic.Anthropic)
        self._async_client = async_client
        self._async_clients: WeakKeyDictionary[
            asyncio.AbstractEventLoop, anthropic.AsyncAnthropic
        ] = WeakKeyDictionary()
        self.base_url = str(self._client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    def _make_client(self, cls: Any) -> Any:
        try:
            return cls(**self._client_args)
        except self._sdk.AnthropicError as e:
            raise ModelError(
                f"{self.provider}: cannot create the client: {e} "
                "(pass api_key= or set ANTHROPIC_API_KEY)"
            ) from e

    def _aclient(self) -> anthropic.AsyncAnthropic:
        """The async client: ``async_client``, or one per event loop (an async HTTP client
        cannot outlive its loop, e.g. across ``asyncio.run`` calls) made with the same
        settings; pass ``async_client`` to control headers or transport."""
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            self._client_args["base_url"] = self._client.base_url
            if self._client.api_key is not None:
                self._client_args["api_key"] = self._client.api_key
            client = self._async_clients[loop] = self._make_client(self._sdk.AsyncAnthropic)
        return client

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """One Messages API call; returns the assistant message with usage and stop_reason."""
        request = self._request(messages, tools, options)
        try:
            create = self._client.messages.create
            response = create(**sdk_kwargs(create, request))
        except self._sdk.AnthropicError as e:
            raise map_sdk_error(self.provider, e, self._sdk, self.base_url) from e
        return self._parse(response)

    async def acomplete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Async ``complete`` (``anthropic.AsyncAnthropic``)."""
        request = self._request(messages, tools, options)
        try:
            acreate = self._aclient().messages.create
            response = await acreate(**sdk_kwargs(acreate, request))
        except self._sdk.AnthropicError as e:
            raise map_sdk_error(self.provider, e, self._sdk, self.base_url) from e
        return self._parse(response)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The keyword arguments for ``messages.create``."""
        opts = merge_options({"max_tokens": self.max_tokens, **self.default_options}, options)
        if opts.get("stream"):
            raise ValueError("AnthropicMessages does not stream; drop the 'stream' option")
        system, wire = to_anthropic(messages)
        system = _join_system(opts.pop("system", None), system)
        request: dict[str, Any] = {"model": opts.pop("model", self.name), "messages": wire}
        if system:
            request["system"] = system
        if tools:
            request["tools"] = tools_to_anthropic(tools)
        request.update(opts)
        return request

    def _parse(self, response: Any) -> Message:
        """The assistant message, with usage, model and stop_reason."""
        data: dict[str, Any] = response.to_dict(mode="json")
        msg = assistant_from_anthropic(data.get("content") or [])
        return msgspec.structs.replace(
            msg,
            usage=usage_from_anthropic(data.get("usage")),
            model=data.get("model") or self.name,
            provider=self.provider,
            stop_reason=data.get("stop_reason"),
        )


def _join_system(explicit: Any, from_messages: str | None) -> Any:
    """An explicit ``system`` option (string or text blocks) first, then the messages' text."""
    if explicit is None or not from_messages:
        return explicit if explicit is not None else from_messages
    if isinstance(explicit, str):
        return explicit + SYSTEM_SEPARATOR + from_messages
    return [*explicit, {"type": "text", "text": from_messages}]
