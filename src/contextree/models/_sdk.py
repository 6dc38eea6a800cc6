"""``SdkModel``: what the SDK-backed adapters share.

Importing the optional SDK (an ImportError naming the extra when it is missing), reading the
key and base URL from arguments or the environment, one sync client and one async client per
event loop (an async HTTP client cannot outlive its loop), and mapping SDK errors to
``ModelError``. Subclasses say which SDK and endpoint, and how to build a request and read a
response.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar
from weakref import WeakKeyDictionary

from contextree._messages import Message
from contextree.errors import ModelError, ModelUnavailable, missing_extra
from contextree.models._base import (
    Model,
    ToolSpec,
    is_local_url,
    map_sdk_error,
    merge_options,
    sdk_kwargs,
    status_error,
)
from contextree.models._stream import (
    Assembler,
    AsyncReplyStream,
    ReplyStream,
    UnreadableEvent,
    malformed_reply,
)
from contextree.models._wire_common import Json

if TYPE_CHECKING:
    import openai

LOCAL_API_KEY = "not-needed"
"""The key sent to a local server (localhost, a private address) when none is configured."""


class SdkModel(Model, ABC):
    """Base of ``OpenAIChat``, ``OpenAIResponses`` and ``AnthropicMessages``; see those for
    the options.

    SDK clients and responses are typed ``Any`` here: the SDKs are optional extras, imported
    when a model is built, so their types cannot be named at run time; the subclasses name
    them in their public signatures (under ``TYPE_CHECKING``).
    """

    sdk_module: ClassVar[str]  # "openai"; also the name of the extra
    sync_client: ClassVar[str]  # "OpenAI"
    async_client_class: ClassVar[str]  # "AsyncOpenAI"
    sdk_error: ClassVar[str]  # "OpenAIError"
    key_env: ClassVar[str]  # "OPENAI_API_KEY"
    url_env: ClassVar[str]  # "OPENAI_BASE_URL"
    api_name: ClassVar[str]  # "OpenAI Chat Completions API", named in error messages

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        client: Any,  # an SDK client (optional extra: see the class notes)
        async_client: Any,
        provider: str,
        default_options: Mapping[str, Any],
    ) -> None:
        try:
            self._sdk: ModuleType = importlib.import_module(self.sdk_module)
        except ImportError:
            raise missing_extra(self.sdk_module, self.sdk_module) from None
        self.name = model
        self.provider = provider
        self.default_options: dict[str, Any] = dict(default_options)
        base_url = base_url or os.environ.get(self.url_env) or None
        key = api_key or os.environ.get(self.key_env) or None
        if key is None and is_local_url(base_url):
            key = LOCAL_API_KEY
        self._client_args: dict[str, Any] = {"max_retries": 0}
        if key is not None:
            self._client_args["api_key"] = key
        if base_url is not None:
            self._client_args["base_url"] = base_url
        if client is None and async_client is not None:  # same settings as the given one
            self._client_args.update(api_key=async_client.api_key, base_url=async_client.base_url)
        self._client = client or self._make_client(self.sync_client)
        self._async_client = async_client
        self._async_clients: WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            WeakKeyDictionary())
        self.base_url = str(self._client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    # -- what subclasses provide -----------------------------------------------------------
    @abstractmethod
    def _endpoint(self, client: Any) -> Any:
        """The SDK method that runs one completion on ``client``."""

    @abstractmethod
    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                 options: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of the endpoint for one call."""

    @abstractmethod
    def _from_body(self, data: Json) -> Message:
        """The assistant message in a response body (the SDK response's ``to_dict``, or the
        body a stream assembler rebuilt), with usage, cost, model and stop_reason."""

    @abstractmethod
    def _assembler(self) -> Assembler:
        """A fresh assembler of this API's stream chunks."""

    def _too_deep(self, e: RecursionError) -> BaseException:
        """A response body nested too deeply to parse, as a ``ModelReplyMalformed``."""
        return malformed_reply(self.provider, e, source=self.base_url, api=self.api_name,
                               streamed=False) or e

    def _undecodable(self, e: json.JSONDecodeError | UnicodeDecodeError) -> BaseException:
        """A body sent as JSON that the SDK could not decode (cut off, empty, not UTF-8), as
        the ``ModelReplyMalformed`` quoting its start that any unreadable body is."""
        sent = e.doc if isinstance(e, json.JSONDecodeError) else e.object
        body = sent.decode("utf-8", "replace") if isinstance(sent, bytes) else str(sent)
        reason = f"not JSON: {e}" if body.strip() else "empty"
        return malformed_reply(self.provider, UnreadableEvent(reason, body),
                               source=self.base_url, api=self.api_name, streamed=False) or e

    def _parse(self, response: Any) -> Message:
        """The assistant message in the SDK's response; a body that is not the API's shape
        is a ``ModelReplyMalformed``."""
        try:
            return self._from_body(response.to_dict(mode="json", warnings=False))
        except ModelError:
            raise
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
            reason = (f"{type(e).__name__}: {e}" if callable(getattr(response, "to_dict", None))
                      else "not a JSON object")
            unreadable = UnreadableEvent(reason, response)
            raise malformed_reply(self.provider, unreadable, source=self.base_url,
                                  api=self.api_name, streamed=False) or e from e

    def _stream_request(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                        options: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of the endpoint for one streamed call."""
        return {**self._request(messages, tools, options), "stream": True}

    def _option_defaults(self) -> dict[str, Any]:
        """The options every request starts from (``default_options``)."""
        return dict(self.default_options)

    def request_params(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The request parameters a call with per-call ``options`` sends: the defaults
        under them, ``None`` values dropped (what ``RequestEntry.params`` records)."""
        return merge_options(self._option_defaults(), options)

    # -- shared ----------------------------------------------------------------------------
    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """One completion; returns the assistant message with usage and stop_reason."""
        with self._calling(self._client, self._request(messages, tools, options)) as call:
            response = call()
        return self._parse(response)

    async def acomplete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Async ``complete``, through the SDK's async client."""
        with self._calling(self._aclient(), self._request(messages, tools, options)) as call:
            response = await call()
        return self._parse(response)

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ReplyStream:
        """Start one completion and return its stream: iterate it for deltas, then
        ``.message`` is the same assistant message ``complete`` returns. Use it as a context
        manager so the connection is released if you stop early."""
        request = self._stream_request(messages, tools, options)
        with self._calling(self._client, request) as call:
            raw = call()
        return ReplyStream(iter(raw), self._assembler(), self._from_body,
                           errors=self._stream_error, provider=self.provider, close=raw.close)

    async def astream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> AsyncReplyStream:
        """Async ``stream``, through the SDK's async client (``async for`` the deltas)."""
        request = self._stream_request(messages, tools, options)
        with self._calling(self._aclient(), request) as call:
            raw = await call()
        return AsyncReplyStream(raw.__aiter__(), self._assembler(), self._from_body,
                                errors=self._stream_error, provider=self.provider,
                                close=raw.close)

    def _call_json(self, endpoint: Callable[[Any], Any], request: Mapping[str, Any]) -> Json:
        """One call of another endpoint of the sync client (``endpoint(client)``: the
        SDK method), its response as JSON; SDK errors are ``ModelError``s."""
        with self._calling(self._client, request, endpoint) as call:
            response = call()
        body = response.to_dict(mode="json", warnings=False)
        if not isinstance(body, dict):
            raise malformed_reply(self.provider, UnreadableEvent("not a JSON object", response),
                                  source=self.base_url, api=self.api_name,
                                  streamed=False) or ValueError("not a JSON object")
        return body

    @contextmanager
    def _calling(self, client: Any, request: Mapping[str, Any],
                 endpoint: Callable[[Any], Any] | None = None) -> Iterator[Callable[[], Any]]:
        """The endpoint of ``client`` (``endpoint(client)``, by default the completion one)
        bound to ``request`` (what the SDK's signature accepts); an SDK error raised in the
        block is mapped to a ``ModelError``. The sync and async calls share it: the async
        one awaits what the call returns."""
        create = (endpoint or self._endpoint)(client)
        kwargs = sdk_kwargs(create, request)
        try:
            yield lambda: create(**kwargs)
        except getattr(self._sdk, self.sdk_error) as e:
            raise map_sdk_error(self.provider, e, self._sdk, self.base_url) from e
        except RecursionError as e:  # a body nested too deeply for the SDK's JSON parser
            raise self._too_deep(e) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:  # a "JSON" body cut off
            raise self._undecodable(e) from None

    def _stream_error(self, exc: BaseException, started: bool) -> BaseException | None:
        """A failure while reading a stream, as a ``ModelError``: a connection lost after
        the reply began is a cut-off stream (retrying may help); an error event in the
        stream is mapped by its type, as the status it stands for would be; an event that
        is not JSON, or not the API's shape, is a ``ModelReplyMalformed``."""
        sdk_error = getattr(self._sdk, self.sdk_error)
        if isinstance(exc, self._sdk.APIStatusError) and int(exc.status_code) < 400:
            status = _STREAM_ERROR_STATUS.get(_error_type(exc), 500)
            return status_error(self.provider, status, _error_message(exc))
        if started and isinstance(exc, self._sdk.APIConnectionError):
            return ModelUnavailable(f"{self.provider}: the reply stream from {self.base_url} "
                                    f"was cut off: {exc} (retrying may help)")
        if isinstance(exc, sdk_error):
            return map_sdk_error(self.provider, exc, self._sdk, self.base_url)
        if type(exc).__module__.startswith(("httpx", "httpcore")):  # httpx2 too
            return ModelUnavailable(f"{self.provider}: the reply stream from {self.base_url} "
                                    f"was cut off: {type(exc).__name__}: {exc} "
                                    "(retrying may help)")
        return malformed_reply(self.provider, exc, source=self.base_url, api=self.api_name)

    def _make_client(self, class_name: str) -> Any:
        try:
            return getattr(self._sdk, class_name)(**self._client_args)
        except getattr(self._sdk, self.sdk_error) as e:
            raise ModelError(f"{self.provider}: cannot create the client: {e} "
                             f"(pass api_key= or set {self.key_env})") from e

    def _aclient(self) -> Any:
        """``async_client``, or one per event loop made with the sync client's settings."""
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            self._client_args["base_url"] = self._client.base_url
            if self._client.api_key is not None:
                self._client_args["api_key"] = self._client.api_key
            client = self._async_clients[loop] = self._make_client(self.async_client_class)
        return client


class OpenAISdkModel(SdkModel, ABC):
    """What the two adapters of the ``openai`` SDK share: the SDK's names, the key and URL
    variables, and one constructor (``OpenAIChat`` adds ``reasoning_field`` to it;
    ``OpenAIResponses`` takes it as it is)."""

    sdk_module = "openai"
    sync_client = "OpenAI"
    async_client_class = "AsyncOpenAI"
    sdk_error = "OpenAIError"
    key_env = "OPENAI_API_KEY"
    url_env = "OPENAI_BASE_URL"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        **default_options: Any,
    ) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, client=client,
                         async_client=async_client, provider=provider,
                         default_options=default_options)


# An error event inside a stream (the HTTP status was 200), by its type.
_STREAM_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "api_error": 500, "overloaded_error": 529,
}


def _error_body(exc: BaseException) -> Mapping[str, Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return inner
    return {}


def _error_type(exc: BaseException) -> str:
    return str(_error_body(exc).get("type") or "")


def _error_message(exc: BaseException) -> str:
    return str(_error_body(exc).get("message") or getattr(exc, "message", None) or exc)
