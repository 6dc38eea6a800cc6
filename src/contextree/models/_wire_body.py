"""The exact bytes a request would send, made by the provider's own SDK and never sent.

``request_body(api, ...)`` builds the request the way a real call does (the adapter for
Chat Completions and Anthropic, the SDK's ``responses.create`` for the Responses API, whose
input comes from ``to_openai_responses``), on a client whose HTTP transport keeps the body
and answers an error instead of going to the network. So ``contextree show --context
--wire`` prints the bytes a call would send, whatever the adapter adds to them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from contextree._messages import Message
from contextree.errors import InvalidArgument, ModelError, missing_extra
from contextree.models._base import ToolSpec, sdk_kwargs

__all__ = ["WIRE_APIS", "request_body"]

WIRE_APIS = ("openai", "anthropic", "responses")
"""The APIs a request body can be printed for: Chat Completions, Messages, Responses."""

_UNUSED_URL = "http://wire.invalid"  # never reached: the transport answers itself


def request_body(api: str, model: str, messages: Sequence[Message],
                 tools: Sequence[ToolSpec] = (), params: Mapping[str, Any] | None = None,
                 *, stream: bool = False) -> bytes:
    """The JSON body (bytes) a call of ``model`` on ``api`` (one of ``WIRE_APIS``) would
    send for ``messages``, ``tools`` and request ``params``; ``stream``: a streamed call."""
    if api not in WIRE_APIS:
        raise InvalidArgument(f"unknown wire API {api!r}; choose one of {', '.join(WIRE_APIS)}")
    sdk_name = "anthropic" if api == "anthropic" else "openai"
    try:
        sdk = importlib.import_module(sdk_name)
        base = importlib.import_module(f"{sdk_name}._base_client")
    except ImportError:
        raise missing_extra(sdk_name, sdk_name) from None
    http_lib: Any = getattr(base, "httpx2", None) or base.httpx  # the HTTP client it uses
    sent: list[bytes] = []

    def keep(request: Any) -> Any:
        sent.append(request.read())
        return http_lib.Response(400, json={"error": {"message": "kept, not sent"}})

    http = http_lib.Client(transport=http_lib.MockTransport(keep))
    client_class = "Anthropic" if api == "anthropic" else "OpenAI"
    client = getattr(sdk, client_class)(api_key="unused", base_url=_UNUSED_URL,
                                        max_retries=0, http_client=http)
    options = dict(params or {})
    try:
        _call(api, client, model, messages, tools, options, stream)
    except (ModelError, getattr(sdk, "APIStatusError")):  # noqa: B009 - the SDK is optional
        pass
    finally:
        http.close()
    if not sent:
        raise ModelError(f"{api}: the SDK built no request for these messages")
    return sent[0]


def _call(api: str, client: Any, model: str, messages: Sequence[Message],
          tools: Sequence[ToolSpec], options: dict[str, Any], stream: bool) -> None:
    if api == "responses":
        from contextree.models._wire_openai import to_openai_responses, tools_to_openai_responses

        request: dict[str, Any] = {"model": model, "input": to_openai_responses(messages)}
        if tools:
            request["tools"] = tools_to_openai_responses(tools)
        request.update(options)
        if stream:
            request["stream"] = True
        create = client.responses.create
        create(**sdk_kwargs(create, request))
        return
    adapter: Any
    if api == "anthropic":
        from contextree.models._anthropic import AnthropicMessages

        adapter = AnthropicMessages(model, client=client)
    else:
        from contextree.models._openai_chat import OpenAIChat

        adapter = OpenAIChat(model, client=client)
    if stream:
        adapter.stream(messages, tools=tools, **options)
    else:
        adapter.complete(messages, tools=tools, **options)
