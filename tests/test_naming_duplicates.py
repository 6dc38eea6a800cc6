"""Code that was written twice now serves both places; what each caller sees stays the same."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai.conversation_store")
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)

from contextree.entries import CustomEntry, MessageEntry
from contextree.integrations.pydantic_ai import ContextreeConversationStore

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_store_counts_and_lists_the_current_history_with_one_lookup(tmp_path: Path) -> None:
    """``message_count`` and ``branch_entries`` find the record in force the same way."""
    store = ContextreeConversationStore(tmp_path)
    try:
        assert store.message_count("none") is None and store.branch_entries("none") is None
        messages = [ModelRequest(parts=[UserPromptPart("hi", timestamp=T0)], timestamp=T0),
                    ModelResponse(parts=[TextPart("hello")], timestamp=T0, model_name="m")]
        asyncio.run(store.save(Conversation(conversation_id="c", messages=messages)))
        assert store.message_count("c") == 2
        entries = store.branch_entries("c")
        assert entries is not None
        assert [type(e) for e in entries] == [CustomEntry, MessageEntry, MessageEntry]
    finally:
        store.close()
