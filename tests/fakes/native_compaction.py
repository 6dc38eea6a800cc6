"""Fake servers for provider-native compaction, speaking the documented wire formats.

``CompactingAnthropicServer``: the Messages API with server-side compaction in its two
documented forms. On demand (beta ``compact-2026-09-04``): a request with
``"compaction": {"type": "summarize"}`` (never with ``context_management``, nor
``stop_sequences``, a forcing ``tool_choice`` or an output format, nor a last assistant turn
whose tool call has no result) gets the signed ``compaction`` block alone (a readable
``content``, a ``signature``), ``stop_reason: "compaction"``, and zero top-level usage with
the call in ``usage.iterations``; ``no_summary`` makes it answer 200 with no content and
that stop reason instead. At a threshold (beta ``compact-2026-01-12``): a request whose
``context_management.edits`` hold a ``compact_20260112`` edit and whose input (estimated here
at 4 characters a token) reaches the edit's trigger gets a ``compaction`` block (with an
opaque ``encrypted_content`` too) and, paused, ``stop_reason: "compaction"``; under the
trigger it answers from the queue like any request, and a request that carries an on-demand
block is refused. A ``compaction`` block sent back must be the only one, the first block of
the conversation, carry the signature this server gave it, and come with the beta of the
form that made it.

``ResponsesServer``: ``POST /v1/responses`` (answered from the queue; a request with
``"stream": true`` gets the reply as the API's events: ``response.created``, each output
item added, its deltas and done, ``response.completed`` with usage) and, unless
``compact_endpoint=False`` (a server that does not have it answers 404),
``POST /v1/responses/compact``: the user messages of the input, then one ``compaction``
item whose ``encrypted_content`` only this server can read; later requests may send it back.
"""

from __future__ import annotations

import json
from typing import Any

from . import SSE, FakeServer, Recorded, Reply
from .anthropic_server import AnthropicServer, error

BETA = "compact-2026-01-12"
EDIT = "compact_20260112"
MIN_TRIGGER = 50_000
ON_DEMAND_BETA = "compact-2026-09-04"


def estimate(*parts: Any, chars_per_token: int = 4) -> int:
    """The server's own token count of request parts: 4 characters a token."""
    return sum(len(json.dumps(p)) for p in parts if p is not None) // chars_per_token


class CompactingAnthropicServer(AnthropicServer):
    """``AnthropicServer`` with server-side compaction (see the module notes).

    ``refuse`` (a ``Reply``), when set, answers every compaction request (a model without
    compaction, an outage); ``no_summary`` (a stop reason), when set, makes an on-demand one
    come back without a summary. ``compactions`` counts the compactions made;
    ``chars_per_token`` is how the server counts (more: it counts fewer tokens).
    """

    def __init__(self) -> None:
        super().__init__()
        self.refuse: Reply | None = None
        self.no_summary: str | None = None
        self.compactions = 0
        self.chars_per_token = 4
        self.issued: dict[str, tuple[str, str]] = {}  # signature -> (beta of its form, summary)

    def route_ok(self, method: str, path: str) -> bool:
        return method == "POST" and path in ("/v1/messages", "/v1/messages?beta=true")

    def validate(self, body: Any) -> str | None:
        messages = body.get("messages") if isinstance(body, dict) else None
        if isinstance(messages, list) and messages and _starts_with_compaction(messages[0]):
            # The compaction block stands first; the API drops what came before it.
            rest = [*messages[0]["content"][1:]]
            body = {**body, "messages": ([{"role": "user", "content": "[compacted]"},
                                          {"role": "assistant", "content": rest}] if rest
                                         else [{"role": "user", "content": "[compacted]"}])
                    + messages[1:]}
        return super().validate(body)

    def _answer(self, req: Recorded) -> Reply | SSE:
        refused = self.refusal(req)
        if refused is not None:
            return refused
        body = req.body
        betas = req.headers.get("anthropic-beta", "")
        messages = body.get("messages") or []
        carried: str | None = None  # the beta of the block the request carries
        for i, m in enumerate(messages):
            content = m.get("content") if isinstance(m, dict) else None
            for j, b in enumerate(content if isinstance(content, list) else []):
                if isinstance(b, dict) and b.get("type") == "compaction":
                    if carried is not None:
                        return error(400, "a request carries at most one compaction block")
                    made = self.issued.get(str(b.get("signature")))
                    if made is None:
                        return error(400, "compaction_signature_invalid")
                    carried, summary = made
                    if b.get("content") != summary:
                        return error(400, "compaction_content_mismatch")
                    if carried not in betas:
                        return error(400, f"messages.{i}.content.{j}: compaction blocks need "
                                          f"the beta header {carried}")
                    if i or j:
                        return error(400, "compaction_block_misplaced: the compaction block "
                                          "is not the first block of the conversation")
        if "compaction" in body:
            return self._on_demand(body, betas)
        edits = (body.get("context_management") or {}).get("edits") or []
        edit = next((e for e in edits if e.get("type") == EDIT), None)
        if edit is None:
            return super()._answer(req)
        if BETA not in betas:
            return error(400, f"context_management.edits.0: {EDIT} needs the beta header {BETA}")
        if carried == ON_DEMAND_BETA:
            return error(400, f"{EDIT} cannot run on a request that carries a signed "
                              "compaction block")
        trigger = (edit.get("trigger") or {}).get("value", 150_000)
        if not isinstance(trigger, int) or trigger < MIN_TRIGGER:
            return error(400, f"context_management.edits.0.trigger: must be at least "
                              f"{MIN_TRIGGER} input tokens")
        if self.refuse is not None:
            return self.refuse
        tokens = estimate(body.get("system"), messages, chars_per_token=self.chars_per_token)
        if tokens < trigger:
            return super()._answer(req)  # under the trigger: an ordinary reply
        if not edit.get("pause_after_compaction"):
            return error(400, "fake server: only pause_after_compaction is served")
        block = self._block(messages, edit.get("instructions"), BETA)
        block["encrypted_content"] = f"opaque-{self.compactions}-{len(messages)}"
        return Reply(200, {"id": f"msg_compact_{self.compactions}", "type": "message",
                           "role": "assistant", "model": body.get("model"),
                           "content": [block], "stop_reason": "compaction",
                           "stop_sequence": None,
                           "usage": {"input_tokens": tokens, "output_tokens": 40,
                                     "cache_read_input_tokens": 0,
                                     "cache_creation_input_tokens": 0}})

    def _on_demand(self, body: dict[str, Any], betas: str) -> Reply:
        """The answer to an on-demand compaction request (see the module notes)."""
        config = body["compaction"]
        if ON_DEMAND_BETA not in betas:
            return error(400, f"compaction: the compaction parameter requires anthropic-beta: "
                              f"{ON_DEMAND_BETA}")
        if not isinstance(config, dict) or config.get("type") != "summarize":
            return error(400, "compaction.type: Input should be 'summarize'")
        if "context_management" in body:
            return error(400, "compaction cannot be combined with context_management")
        choice = body.get("tool_choice") or {}
        if ("stop_sequences" in body or choice.get("type") in ("any", "tool")
                or "format" in (body.get("output_config") or {})):
            return error(400, "compaction cannot be combined with stop_sequences, a forced "
                              "tool_choice or an output format")
        messages = body["messages"]
        last = messages[-1]
        if last.get("role") == "assistant" and any(
                isinstance(b, dict) and b.get("type") == "tool_use"
                for b in (last["content"] if isinstance(last["content"], list) else [])):
            return error(400, "compaction_incomplete_turn: the last assistant turn ends in a "
                              "tool call with no result")
        if self.refuse is not None:
            return self.refuse
        tokens = estimate(body.get("system"), body.get("tools"), messages,
                          chars_per_token=self.chars_per_token)
        iteration = {"type": "compaction", "input_tokens": tokens, "output_tokens": 40,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        content: list[dict[str, Any]] = []
        stop = self.no_summary
        if stop is None:
            content = [self._block(messages, config.get("instructions"), ON_DEMAND_BETA)]
            stop = "compaction"
        return Reply(200, {"id": f"msg_compact_{self.compactions}", "type": "message",
                           "role": "assistant", "model": body.get("model"),
                           "content": content, "stop_reason": stop, "stop_sequence": None,
                           "usage": {"input_tokens": 0, "output_tokens": 0,
                                     "cache_read_input_tokens": 0,
                                     "cache_creation_input_tokens": 0,
                                     "iterations": [iteration]}})

    def _block(self, messages: list[Any], instructions: str | None, beta: str) -> dict[str, Any]:
        """A new signed compaction block of ``messages``, made by the form of ``beta``."""
        self.compactions += 1
        summary = summarize(messages, instructions)
        signature = f"sig-{self.compactions}-{len(summary)}"
        self.issued[signature] = (beta, summary)
        return {"type": "compaction", "content": summary, "signature": signature}


def _starts_with_compaction(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return (message.get("role") == "assistant" and isinstance(content, list) and bool(content)
            and isinstance(content[0], dict) and content[0].get("type") == "compaction")


def summarize(messages: list[Any], instructions: str | None = None) -> str:
    """The fake provider's summary: the user's texts it saw (a previous compaction's summary
    first), so a test can tell what was compacted."""
    said: list[str] = []
    for m in messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks or ():
            if b.get("type") == "compaction":
                said.append(f"(earlier: {b.get('content')})")
            elif m.get("role") == "user" and b.get("type") == "text":
                said.append(b["text"][:60])
    head = f"[{instructions}] " if instructions else ""
    return head + "The user asked: " + " | ".join(said)


class ResponsesServer(FakeServer):
    """The Responses API and its compaction endpoint (see the module notes)."""

    def __init__(self, *, compact_endpoint: bool = True) -> None:
        super().__init__()
        self.compact_endpoint = compact_endpoint
        self.issued: dict[str, int] = {}  # encrypted_content -> input items it stands for

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def route_ok(self, method: str, path: str) -> bool:
        paths = {"/v1/responses", *(("/v1/responses/compact",) if self.compact_endpoint
                                    else ())}
        return method == "POST" and path in paths

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, {"error": {"message": message, "type": "invalid_request_error",
                                        "param": None, "code": None}})

    def to_stream(self, body: dict[str, Any], req: Recorded) -> SSE:
        """A ``response`` body as the Responses API's events (see ``events``)."""
        return SSE([(e["type"], e) for e in self.events(body)])

    def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The events that stream ``body``, numbered: ``response.created`` and
        ``response.in_progress`` (no output, no usage), then per output item
        ``response.output_item.added``, its parts and deltas in pieces of ``chunk``
        characters, ``response.output_item.done`` with the whole item, and
        ``response.completed`` with the whole response."""
        shell = {**{k: v for k, v in body.items() if k != "usage"},
                 "status": "in_progress", "output": []}
        out: list[dict[str, Any]] = [{"type": "response.created", "response": shell},
                                     {"type": "response.in_progress", "response": shell}]
        for i, item in enumerate(body.get("output") or ()):
            out.extend(self._item_events(i, item))
        out.append({"type": "response.completed",
                    "response": {**body, "status": body.get("status") or "completed"}})
        return [{**e, "sequence_number": n} for n, e in enumerate(out)]

    def _item_events(self, i: int, item: dict[str, Any]) -> list[dict[str, Any]]:
        kind, item_id = item.get("type"), item.get("id")
        at = {"item_id": item_id, "output_index": i}
        added = dict(item)
        inner: list[dict[str, Any]] = []
        if kind == "message":
            added.update(content=[], status="in_progress")
            for c, part in enumerate(item.get("content") or ()):
                text = part.get("text", "")
                inner.append({"type": "response.content_part.added", **at, "content_index": c,
                              "part": {**part, "text": ""}})
                inner.extend({"type": "response.output_text.delta", **at, "content_index": c,
                              "delta": p, "logprobs": []} for p in self.pieces(text))
                inner.append({"type": "response.output_text.done", **at, "content_index": c,
                              "text": text, "logprobs": []})
                inner.append({"type": "response.content_part.done", **at, "content_index": c,
                              "part": part})
        elif kind == "reasoning":  # (its encrypted content comes with the done item)
            added.update(summary=[])
            added.pop("encrypted_content", None)
            for s, part in enumerate(item.get("summary") or ()):
                text = part.get("text", "")
                inner.append({"type": "response.reasoning_summary_part.added", **at,
                              "summary_index": s, "part": {"type": "summary_text", "text": ""}})
                inner.extend({"type": "response.reasoning_summary_text.delta", **at,
                              "summary_index": s, "delta": p} for p in self.pieces(text))
                inner.append({"type": "response.reasoning_summary_text.done", **at,
                              "summary_index": s, "text": text})
                inner.append({"type": "response.reasoning_summary_part.done", **at,
                              "summary_index": s, "part": part})
        elif kind == "function_call":
            added.update(arguments="", status="in_progress")
            inner.extend({"type": "response.function_call_arguments.delta", **at, "delta": p}
                         for p in self.pieces(item.get("arguments", "")))
            inner.append({"type": "response.function_call_arguments.done", **at,
                          "name": item.get("name"), "arguments": item.get("arguments", "")})
        return [{"type": "response.output_item.added", "output_index": i, "item": added},
                *inner, {"type": "response.output_item.done", "output_index": i, "item": item}]

    def validate(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return "model: required"
        items = body.get("input")
        if not isinstance(items, list):
            return "input: an array of items is required here"
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                return f"input[{i}]: each item needs a type"
            if item["type"] == "compaction" and item.get("encrypted_content") not in self.issued:
                return f"input[{i}]: invalid encrypted_content in the compaction item"
        return None

    def _answer(self, req: Recorded) -> Reply | SSE:
        if req.path != "/v1/responses/compact" or not self.route_ok(req.method, req.path):
            return super()._answer(req)
        refused = self.refusal(req)
        if refused is not None:
            return refused
        items = req.body["input"]
        users = [i for i in items if i.get("type") == "message" and i.get("role") == "user"]
        key = f"enc-{len(self.issued) + 1}-{len(items)}"
        self.issued[key] = len(items)
        output = [{"type": "message", "id": f"msg_{n}", "role": "user", "status": "completed",
                   "content": u["content"]} for n, u in enumerate(users)]
        output.append({"type": "compaction", "id": f"cmp_{len(self.issued)}",
                       "encrypted_content": key})
        used = estimate(items)
        return Reply(200, {"id": f"resp_compact_{len(self.issued)}",
                           "object": "response.compaction", "created_at": 1_780_000_000,
                           "output": output,
                           "usage": {"input_tokens": used, "output_tokens": 50,
                                     "total_tokens": used + 50,
                                     "input_tokens_details": {"cached_tokens": 0},
                                     "output_tokens_details": {"reasoning_tokens": 0}}})


def response(text: str | None = None, *items: dict[str, Any], model: str = "gpt-test",
             input_tokens: int = 30, cached_tokens: int = 0,
             output_tokens: int = 5) -> dict[str, Any]:
    """A ``response`` body whose output is ``items`` (``reasoning``, ``function_call``...)
    then, when ``text`` is given, one assistant message of ``text``."""
    output = list(items)
    if text is not None:
        output.append({"type": "message", "id": "msg_out", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    return {"id": "resp_1", "object": "response", "created_at": 1_780_000_000,
            "model": model, "status": "completed", "output": output,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens,
                      "input_tokens_details": {"cached_tokens": cached_tokens},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def function_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A ``function_call`` output item (``arguments``: an object, or the raw text sent)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": args, "status": "completed"}


def reasoning(*summary: str, encrypted: str | None = None) -> dict[str, Any]:
    """A ``reasoning`` output item with these summary texts."""
    item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{len(summary)}",
                            "summary": [{"type": "summary_text", "text": t} for t in summary]}
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item
