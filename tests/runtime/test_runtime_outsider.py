"""What a developer meets on a first careless day with the runtime: a provider that sends a
lone surrogate, tool hooks and approvals, several turns on one session at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import DefaultToolPipeline, SessionTree, ToolResultLoop
from fakes import SSE, Recorded, Reply
from fakes.openai_server import OpenAIServer, completion


def _with_lone_surrogate(server: OpenAIServer, text: str):  # type: ignore[no-untyped-def]
    """A completion whose content holds ``\\ud800`` escaped in the JSON, as some servers
    send a cut emoji: valid JSON, decoded by the SDK into a lone surrogate (streamed or
    not, as the request asks)."""
    body = completion(text + " XX")
    server.chunk = 1000  # the text in one piece, so " XX" is in one event

    def answer(req: Recorded) -> Reply | SSE:
        if req.body.get("stream"):
            return SSE([(None, json.dumps(c).replace(" XX", " \\ud800"))
                        for c in server.chunks(body, req)] + [(None, "[DONE]")])
        return Reply(200, raw=json.dumps(body).replace(" XX", " \\ud800").encode())

    return answer


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_with_a_lone_surrogate_is_kept_not_lost(oa: OpenAIServer, tmp_path: Path,
                                                        stream: bool) -> None:
    oa.reply(_with_lone_surrogate(oa, "half an emoji:"))
    model = OpenAIChat("gpt-test", base_url=oa.base_url, api_key="k")
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(model, stream=stream)
    turn = agent.start("hi")
    assert turn.text == "half an emoji: \ufffd"
    with Session.open(tmp_path / "s.jsonl", readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["hi", "half an emoji: \ufffd"]
