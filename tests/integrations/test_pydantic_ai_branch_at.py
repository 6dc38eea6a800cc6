"""``store.branch(cid, at=n)`` as the docs describe it: ``n`` counts pydantic-ai messages, the
``n``-th becomes the head, the contextree session's branch ends there, the turns left stay
stored, and the next run continues from the head."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextree.entries import CustomEntry, MessageEntry
from contextree.integrations.pydantic_ai import ContextreeConversationStore


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Run the tests once per turn, then answer with the turn's prompt."""
    last = messages[-1]
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        prompt = [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts
                  if isinstance(p, UserPromptPart)][-1]
        return ModelResponse(parts=[TextPart(f"Answer to {prompt}")])
    return ModelResponse(parts=[ToolCallPart("shell", {"command": "pytest"})])


def test_branch_at_keeps_n_messages_and_the_next_turn_goes_on_from_there(
        tmp_path: Path) -> None:
    store = ContextreeConversationStore(tmp_path / "conversations")
    agent: Agent[None, str] = Agent(FunctionModel(scripted))

    @agent.tool_plain
    def shell(command: str) -> str:
        return "1 failed"

    async def main() -> None:
        conversation = Conversation(conversation_id="c")
        for turn in range(3):
            result = await agent.run(f"turn {turn}", conversation=conversation)
            await store.save(result)
            conversation = result.conversation
        current = await store.load("c")
        assert current is not None and len(current.messages) == 12  # 4 a turn

        branched = await store.branch("c", at=8, expected_revision=current.revision)
        assert len(branched.messages) == 8
        assert branched.messages[-1].parts[0].content == "Answer to turn 1"  # type: ignore[union-attr]

        # The session: its leaf is the branch's record, right under the head (turn 1's
        # answer), so its branch and its context end there.
        session = store.session("c")
        assert session is not None
        leaf = session.get_entry(session.leaf_id or "")
        assert isinstance(leaf, CustomEntry)
        messages = [e for e in session.branch() if isinstance(e, MessageEntry)]
        assert messages[-1].message.text == "Answer to turn 1"
        assert leaf.parent_id == messages[-1].id
        assert session.build_context().messages[-1].text == "Answer to turn 1"

        # The turn taken back stays stored, as a branch left.
        loaded = await store.load("c")
        assert loaded is not None
        record = await store.read_record("c")
        assert record is not None and len(record.branches) == 1
        left = await store.read_history(record.branches[0])
        assert len(left) == 12

        # The next run continues from the head.
        again = await agent.run("turn 2 again", conversation=loaded)
        await store.save(again)
        final = await store.load("c")
        assert final is not None and len(final.messages) == 12
        assert final.messages[7].parts[0].content == "Answer to turn 1"  # type: ignore[union-attr]
        assert final.messages[-1].parts[0].content == "Answer to turn 2 again"  # type: ignore[union-attr]
        assert store.session("c").build_context().messages[-1].text == (  # type: ignore[union-attr]
            "Answer to turn 2 again")

    try:
        asyncio.run(main())
    finally:
        store.close()
