"""A middleware option value the constructor refuses fails at ``use(...)``, where it is
written, with an error naming the middleware and the option: not at the first ``start()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree.errors import InvalidArgument
from contextree.models import ScriptedModel
from contextree.runtime import (
    Budget,
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    DoomLoop,
    MaxIterations,
    Retry,
    SessionTree,
    SystemPrompt,
)

REFUSED: list[tuple[Any, dict[str, Any], str]] = [
    (MaxIterations, {"limit": 0}, "MaxIterations: limit"),
    (DoomLoop, {"threshold": 1}, "DoomLoop: threshold"),
    (Retry, {"attempts": 0}, "Retry: attempts"),
    (Retry, {"base_delay": -1.0}, "Retry: base_delay"),
    (Retry, {"max_delay": -5.0}, "Retry: max_delay must be 0 or more seconds"),
    (Retry, {"base_delay": float("nan")}, "Retry: base_delay must be 0 or more seconds"),
    (SystemPrompt, {"text": None}, "SystemPrompt: text"),
    (DefaultToolPipeline, {"concurrency": 0}, "DefaultToolPipeline: concurrency"),
    (DefaultCompactionPipeline, {"window": 0}, "DefaultCompactionPipeline: window"),
    (DefaultCompactionPipeline, {"window": 1000, "compact_at": 0.3},
     "DefaultCompactionPipeline: .*compact_at=0.3"),
    (Budget, {"max_tokens": -1}, "Budget: max_tokens"),
    (Budget, {"max_cost": float("nan")}, "Budget: max_cost must be 0 or more, got nan"),
    (Budget, {"max_cost": 1.0, "reserve_output": -1}, "Budget: reserve_output"),
    (Budget, {"max_cost": 1.0, "per": "day"}, "Budget: per"),
    (SessionTree, {}, "SessionTree: give path="),
]


@pytest.mark.parametrize(("middleware", "options", "says"), REFUSED)
def test_a_refused_value_fails_at_use(middleware: Any, options: dict[str, Any],
                                      says: str) -> None:
    builder = ct.agent()
    with pytest.raises(InvalidArgument, match=says):
        builder.use(middleware, **options)  # no .run(), no .start()


def test_accepted_options_build_a_stack_that_runs(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello."])
    path = tmp_path / "s.jsonl"
    built = (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text="Hi")
             .use(MaxIterations, limit=3).use(Retry, attempts=2, base_delay=0.0)
             .use(DefaultCompactionPipeline, window=100_000)
             .use(DefaultToolPipeline, tools=[], concurrency=2).run(model))
    # use() built each layer only to check it: nothing opened, nothing called.
    assert not path.exists() and model.calls == []
    assert built.start("Hi?").text == "Hello." and len(model.calls) == 1
