"""``AnthropicMessages``: the Anthropic Messages API through the ``anthropic`` SDK.

Message conversion lives in ``wire_anthropic`` (system messages -> ``system``, tool results
merged per turn, thinking signatures sent back verbatim); this module only calls the SDK and
maps its errors to ``ModelError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contextree._messages import Message
from contextree._pricing import with_cost
from contextree.errors import CompactionError
from contextree.models._base import ToolSpec, merge_options
from contextree.models._native import (
    ANTHROPIC_COMPACT_BETA,
    ANTHROPIC_COMPACT_EDIT,
    ANTHROPIC_MIN_TRIGGER,
    MESSAGES_API,
    NativeCompaction,
)
from contextree.models._sdk import SdkModel
from contextree.models._stream import AnthropicAssembler, Assembler
from contextree.models._wire_anthropic import (
    SYSTEM_SEPARATOR,
    assistant_from_anthropic,
    cache_breakpoints,
    sends_compaction,
    to_anthropic,
    tools_to_anthropic,
    usage_from_anthropic,
)
from contextree.models._wire_common import Json

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicMessages"]

class AnthropicMessages(SdkModel):
    """A Claude model (or an Anthropic-compatible server) behind the Messages API.

    ``default_options`` (``temperature``, ``thinking``, ``tool_choice``...) go to every
    request; per-call options override them. Options the installed SDK does not name are sent
    in ``extra_body``. A ``system`` option is put before the text of the system messages. The
    API key comes from ``api_key`` or ``ANTHROPIC_API_KEY`` (else the SDK's own discovery); a
    local ``base_url`` needs none. ``prompt_cache`` (on by default) places ``cache_control``
    breakpoints (``cache_breakpoints``) so that the prefix a request shares with the one
    before it is read from the provider's cache, at the cache rate. The SDK does not retry (``max_retries=0``): failures raise
    ``ModelError`` saying whether to retry.
    """

    sdk_module = "anthropic"
    sync_client = "Anthropic"
    async_client_class = "AsyncAnthropic"
    sdk_error = "AnthropicError"
    key_env = "ANTHROPIC_API_KEY"
    url_env = "ANTHROPIC_BASE_URL"
    api_name = "Anthropic Messages API"

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
        prompt_cache: bool = True,
        **default_options: Any,
    ) -> None:
        self.max_tokens = max_tokens
        self.prompt_cache = prompt_cache
        super().__init__(model, base_url=base_url, api_key=api_key, client=client,
                         async_client=async_client, provider=provider,
                         default_options=default_options)

    def _endpoint(self, client: Any) -> Any:
        return client.messages.create

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The keyword arguments for ``messages.create``."""
        opts = merge_options({"max_tokens": self.max_tokens, **self.default_options}, options)
        if opts.pop("stream", None):
            raise ValueError("AnthropicMessages.complete does not stream; call "
                             "model.stream(...) for a streamed reply")
        system, wire = to_anthropic(messages)
        system = _join_system(opts.pop("system", None), system)
        request: dict[str, Any] = {"model": opts.pop("model", self.name), "messages": wire}
        if system:
            request["system"] = system
        if tools:
            request["tools"] = tools_to_anthropic(tools)
        request.update(opts)
        if sends_compaction(wire):
            # A compaction block sent back needs the beta that made it.
            headers = dict(request.get("extra_headers") or {})
            betas = [b for b in str(headers.get("anthropic-beta", "")).split(",") if b]
            if ANTHROPIC_COMPACT_BETA not in betas:
                headers["anthropic-beta"] = ",".join([*betas, ANTHROPIC_COMPACT_BETA])
            request["extra_headers"] = headers
        return cache_breakpoints(request) if self.prompt_cache else request

    min_native_tokens = ANTHROPIC_MIN_TRIGGER
    """The Messages API compacts nothing under its lowest trigger (50,000 input tokens)."""

    def compact_native(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       instructions: str | None = None) -> NativeCompaction:
        """Server-side compaction of ``messages``: one request with the ``compact_20260112``
        context-management edit (beta ``compact-2026-01-12``), triggered at the lowest
        threshold and paused after the compaction, so the provider returns its
        ``compaction`` block and samples nothing; ``tools`` are the conversation's (its
        ``tool_use`` blocks name them). A reply that is not a compaction (the
        conversation was under the trigger, the block has no summary) raises
        ``CompactionError``; a refused call raises ``ModelError``."""
        request = self._request(messages, tools, {})
        request.pop("extra_headers", None)
        edit: dict[str, Any] = {"type": ANTHROPIC_COMPACT_EDIT,
                                "trigger": {"type": "input_tokens",
                                            "value": ANTHROPIC_MIN_TRIGGER},
                                "pause_after_compaction": True}
        if instructions:
            edit["instructions"] = instructions
        request["context_management"] = {"edits": [edit]}
        request["betas"] = [ANTHROPIC_COMPACT_BETA]
        data = self._call_json(lambda client: client.beta.messages.create, request)
        blocks = [b for b in data.get("content") or () if isinstance(b, dict)
                  and b.get("type") == "compaction"]
        usage = usage_from_anthropic(data.get("usage"))
        if not blocks or data.get("stop_reason") != "compaction":
            raise CompactionError(
                f"{self.provider}: the Messages API did not compact (stop reason "
                f"{data.get('stop_reason')!r}, {len(blocks)} compaction blocks); the "
                "conversation may be under its trigger of "
                f"{ANTHROPIC_MIN_TRIGGER} input tokens")
        block = blocks[-1]
        summary = block.get("content")
        if not isinstance(summary, str) or not summary.strip():
            raise CompactionError(f"{self.provider}: the compaction block has no summary "
                                  "(the provider's compaction failed)")
        return NativeCompaction(self.provider, MESSAGES_API, str(data.get("model") or self.name),
                                [block], summary.strip(), with_cost(
                                    Message.assistant("", usage=usage, model=self.name,
                                                      provider=self.provider)).usage or usage)

    def _assembler(self) -> Assembler:
        return AnthropicAssembler()

    def _option_defaults(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, **self.default_options}

    def _from_body(self, data: Json) -> Message:
        """The assistant message, with usage (priced by the table), model and stop_reason."""
        msg = assistant_from_anthropic(data.get("content") or [])
        return with_cost(msg.replace(
            usage=usage_from_anthropic(data.get("usage")),
            model=data.get("model") or self.name,
            provider=self.provider,
            stop_reason=data.get("stop_reason"),
        ))


def _join_system(explicit: Any, from_messages: str | None) -> Any:
    """An explicit ``system`` option (string or text blocks) first, then the messages' text."""
    if explicit is None or not from_messages:
        return explicit if explicit is not None else from_messages
    if isinstance(explicit, str):
        return explicit + SYSTEM_SEPARATOR + from_messages
    return [*explicit, {"type": "text", "text": from_messages}]
