"""Session ids that no storage can hold (a lone surrogate, from undecodable bytes or a broken
escape): a clear InvalidArgument before anything is written, never a raw
UnicodeEncodeError from inside a write."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextree import Session
from contextree.errors import InvalidArgument

BAD = "chat-\udcff"


def test_create_refuses_a_session_id_with_a_lone_surrogate(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        Session.create(tmp_path / "s.jsonl", session_id=BAD)
    assert not (tmp_path / "s.jsonl").exists()
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        Session.open(f"postgresql://nobody@127.0.0.1:1/none#{BAD}")


def test_the_agents_sdk_session_refuses_it_too(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from contextree.integrations.openai_agents import ContextreeSession

    with pytest.raises(InvalidArgument, match="lone surrogate"):
        ContextreeSession(BAD, tmp_path / "s.jsonl")
