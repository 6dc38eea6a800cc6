"""``AnthropicMessages``: the Anthropic Messages API through the ``anthropic`` SDK.

Message conversion lives in ``wire_anthropic`` (system messages -> ``system``, tool results
merged per turn, thinking signatures sent back verbatim); this module only calls the SDK and
maps its errors to ``ModelError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from contextree._messages import Message, Usage
from contextree._pricing import with_cost
from contextree.errors import CompactionError, InvalidArgument
from contextree.models._base import ToolSpec, merge_options
from contextree.models._native import (
    ANTHROPIC_COMPACT_BETA,
    ANTHROPIC_COMPACT_EDIT,
    ANTHROPIC_MIN_TRIGGER,
    ANTHROPIC_ON_DEMAND_BETA,
    ANTHROPIC_SUMMARIZE,
    MESSAGES_API,
    NativeCompaction,
)
from contextree.models._sdk import SdkModel
from contextree.models._stream import AnthropicAssembler, Assembler
from contextree.models._wire_anthropic import (
    SYSTEM_SEPARATOR,
    assistant_from_anthropic,
    cache_breakpoints,
    compaction_beta,
    to_anthropic,
    tools_to_anthropic,
    usage_from_anthropic,
)
from contextree.models._wire_common import Json

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicMessages"]

NativeForm = Literal["on_demand", "threshold"]
"""How ``compact_native`` asks the Messages API to compact."""


class AnthropicMessages(SdkModel):
    """A Claude model (or an Anthropic-compatible server) behind the Messages API.

    ``default_options`` (``temperature``, ``thinking``, ``tool_choice``...) go to every
    request; per-call options override them. Options the installed SDK does not name are sent
    in ``extra_body``. A ``system`` option is put before the text of the system messages. The
    API key comes from ``api_key`` or ``ANTHROPIC_API_KEY`` (else the SDK's own discovery); a
    local ``base_url`` needs none. ``prompt_cache`` (on by default) places ``cache_control``
    breakpoints (``cache_breakpoints``) so that the prefix a request shares with the one
    before it is read from the provider's cache, at the cache rate. The SDK does not retry
    (``max_retries=0``): failures raise ``ModelError`` saying whether to retry.

    ``native_compaction`` is how ``compact_native`` (the ``ProviderCompaction`` rung) asks
    the API to compact: ``"on_demand"`` (the default, which Anthropic recommends wherever a
    model has it) sends the ``compaction`` parameter, beta ``compact-2026-09-04``;
    ``"threshold"`` sends the ``compact_20260112`` context-management edit, beta
    ``compact-2026-01-12``, for a model without the on-demand form.
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
        native_compaction: NativeForm = "on_demand",
        **default_options: Any,
    ) -> None:
        if native_compaction not in ("on_demand", "threshold"):
            raise InvalidArgument(f"native_compaction must be 'on_demand' or 'threshold', got "
                                  f"{native_compaction!r}")
        self.max_tokens = max_tokens
        self.prompt_cache = prompt_cache
        self.native_compaction: NativeForm = native_compaction
        # The least compact_native compacts: the threshold edit compacts nothing under its
        # lowest trigger (50,000 input tokens); on demand, any conversation.
        self.min_native_tokens = (0 if native_compaction == "on_demand"
                                  else ANTHROPIC_MIN_TRIGGER)
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
        beta = compaction_beta(messages)
        if beta is not None:  # a compaction block sent back needs the beta that made it
            headers = dict(request.get("extra_headers") or {})
            headers["anthropic-beta"] = ",".join(_betas(headers.get("anthropic-beta"), beta))
            request["extra_headers"] = headers
        return cache_breakpoints(request) if self.prompt_cache else request

    def compact_native(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       instructions: str | None = None) -> NativeCompaction:
        """Server-side compaction of ``messages`` (``tools``: the conversation's, which its
        ``tool_use`` blocks name), the way ``native_compaction`` says: on demand, one
        request with ``compaction: {"type": "summarize"}``, whose answer is the signed
        ``compaction`` block alone; at a threshold, the ``compact_20260112`` edit triggered
        at the lowest threshold and paused after the compaction. Either way nothing is
        sampled and the block is returned with the beta its later requests must send. An
        answer without a summary (cut off, a tool call, a refusal, a conversation under the
        trigger) raises ``CompactionError`` saying why; a refused call raises
        ``ModelError``."""
        refusal = self.native_refusal(messages)
        if refusal is not None:
            raise CompactionError(f"{self.provider}: {refusal}")
        request = self._request(messages, tools, {})
        headers = dict(request.pop("extra_headers", None) or {})
        carried = headers.pop("anthropic-beta", None)  # the beta of a block sent back
        if self.native_compaction == "on_demand":
            beta = ANTHROPIC_ON_DEMAND_BETA
            request["compaction"] = {"type": ANTHROPIC_SUMMARIZE,
                                     **({"instructions": instructions} if instructions else {})}
            _drop_what_compaction_refuses(request)
        else:
            beta = ANTHROPIC_COMPACT_BETA
            edit: dict[str, Any] = {"type": ANTHROPIC_COMPACT_EDIT,
                                    "trigger": {"type": "input_tokens",
                                                "value": ANTHROPIC_MIN_TRIGGER},
                                    "pause_after_compaction": True}
            if instructions:
                edit["instructions"] = instructions
            request["context_management"] = {"edits": [edit]}
        request["betas"] = _betas(carried, beta)
        if headers:
            request["extra_headers"] = headers
        data = self._call_json(lambda client: client.beta.messages.create, request)
        return self._native_of(data, beta)

    def native_refusal(self, messages: Sequence[Message]) -> str | None:
        """Why the API would refuse to compact ``messages`` in this model's form, known
        before any request (``None``: it may compact them): the threshold edit refuses a
        conversation that carries an on-demand compaction block."""
        if (self.native_compaction != "on_demand"
                and compaction_beta(messages) == ANTHROPIC_ON_DEMAND_BETA):
            return ("threshold compaction cannot run on a conversation that carries an "
                    "on-demand compaction block; make the model with "
                    "native_compaction='on_demand' to compact it again")
        return None

    def _native_of(self, data: Mapping[str, Any], beta: str) -> NativeCompaction:
        """The compaction a response to a compaction request holds (see ``compact_native``)."""
        blocks = [b for b in data.get("content") or () if isinstance(b, dict)
                  and b.get("type") == "compaction"]
        stop = data.get("stop_reason")
        if not blocks or stop != "compaction":
            hint = (_NO_SUMMARY.get(str(stop), "it gave no reason")
                    if self.native_compaction == "on_demand" else
                    f"the conversation may be under its trigger of {ANTHROPIC_MIN_TRIGGER} "
                    "input tokens")
            raise CompactionError(f"{self.provider}: the Messages API did not compact (stop "
                                  f"reason {stop!r}, {len(blocks)} compaction blocks): {hint}")
        block = blocks[-1]
        summary = block.get("content")
        if not isinstance(summary, str) or not summary.strip():
            raise CompactionError(f"{self.provider}: the compaction block has no summary "
                                  "(the provider's compaction failed)")
        model = str(data.get("model") or self.name)
        usage = _compaction_usage(data.get("usage"))
        priced = with_cost(Message.assistant("", usage=usage, model=model,
                                             provider=self.provider)).usage
        return NativeCompaction(self.provider, MESSAGES_API, model, [block], summary.strip(),
                                priced or usage, beta=beta)

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


def _betas(header: Any, *more: str) -> list[str]:
    """The betas of an ``anthropic-beta`` header value, then ``more``, each once."""
    betas = [b.strip() for b in str(header or "").split(",") if b.strip()]
    return list(dict.fromkeys([*betas, *more]))


def _drop_what_compaction_refuses(request: dict[str, Any]) -> None:
    """Leave out of an on-demand compaction request what the API rejects there (it would do
    nothing on a summarization call): ``context_management``, ``stop_sequences``, a
    ``tool_choice`` that forces a tool, a structured-output format."""
    request.pop("context_management", None)
    request.pop("stop_sequences", None)
    choice = request.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        del request["tool_choice"]
    config = request.get("output_config")
    if isinstance(config, Mapping) and "format" in config:
        rest = {k: v for k, v in config.items() if k != "format"}
        if rest:
            request["output_config"] = rest
        else:
            del request["output_config"]


def _compaction_usage(usage: Any) -> Usage:
    """What a compaction call used: the sum of ``usage.iterations`` (the summarization call
    is reported there; the top-level counts are zero when no reply was sampled), else the
    top-level counts."""
    iterations = usage.get("iterations") if isinstance(usage, Mapping) else None
    parts = ([i for i in iterations if isinstance(i, Mapping)]
             if isinstance(iterations, list) else [])
    if not parts:
        return usage_from_anthropic(usage if isinstance(usage, Mapping) else None)
    total = Usage()
    for part in parts:
        total = total + usage_from_anthropic(part)
    return total


# Why an on-demand compaction returned no summary, by the stop reason (Anthropic's table).
_NO_SUMMARY = {
    "max_tokens": "the summary was cut off; give the model a larger max_tokens",
    "model_context_window_exceeded": "there was no room for the summarization prompt; "
                                     "compact earlier or shorten the instructions",
    "tool_use": "the model called a tool instead of summarizing; give instructions that "
                "say not to call tools",
    "refusal": "the request was declined",
    "end_turn": "the summarization returned no text",
}
