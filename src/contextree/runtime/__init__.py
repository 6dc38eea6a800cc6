"""The agent runtime: a stack of middleware around a model call (Brute's design in Python).

    agent = (contextree.agent()
             .use(SessionTree, path="chat.jsonl")
             .use(SystemPrompt, text="You are a coding agent.")
             .use(ToolResultLoop)
             .use(MaxIterations, limit=100)
             .use(DefaultCompactionPipeline, window=200_000, summarizer=model)
             .use(DefaultToolPipeline, tools=ALL)
             .run(model))
    agent.start("Fix the failing test")

    with agent.stream("Now explain the fix") as events:   # the same turn, watched
        for event in events:
            if isinstance(event, TextDeltaPayload):
                print(event.text, end="")
"""

from typing import TYPE_CHECKING

from .._public import publish

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from ._budget import Budget
    from ._builder import Agent, ModelCall, agent
    from ._compaction import DefaultCompactionPipeline
    from ._env import Env, Events, Handler, SentRequest, TurnResult, TypedHandler
    from ._events import (
        PAYLOADS,
        BudgetPayload,
        CommittedPayload,
        CompactedPayload,
        CompactionFailedPayload,
        CompactionStartPayload,
        DoomLoopPayload,
        Event,
        EventPayload,
        InterruptedPayload,
        MaxIterationsPayload,
        ModelReplyPayload,
        ModelStartPayload,
        Payload,
        RetryPayload,
        StopReason,
        TextDeltaPayload,
        ThinkingDeltaPayload,
        ToolCallPayload,
        ToolEndPayload,
        ToolStartPayload,
        TruncatedPayload,
        TurnEndPayload,
        TurnStartPayload,
    )
    from ._flatlog import LogHealth, LogRepair, is_flat_log, repair_log, verify_log
    from ._loop import DoomLoop, MaxIterations, Retry, SystemPrompt, ToolResultLoop
    from ._persistence import SessionLog, SessionTree
    from ._replay import ReplayLane, ReplayReport, recorded_model, replay
    from ._run import AgentStream, AsyncAgentStream
    from ._tools import DefaultToolPipeline
    from ._tracing import Tracing

__all__ = [
    "PAYLOADS",
    "Agent",
    "AgentStream",
    "AsyncAgentStream",
    "Budget",
    "BudgetPayload",
    "CommittedPayload",
    "CompactedPayload",
    "CompactionFailedPayload",
    "CompactionStartPayload",
    "DefaultCompactionPipeline",
    "DefaultToolPipeline",
    "DoomLoop",
    "DoomLoopPayload",
    "Env",
    "Event",
    "EventPayload",
    "Events",
    "Handler",
    "InterruptedPayload",
    "LogHealth",
    "LogRepair",
    "MaxIterations",
    "MaxIterationsPayload",
    "ModelCall",
    "ModelReplyPayload",
    "ModelStartPayload",
    "Payload",
    "ReplayLane",
    "ReplayReport",
    "Retry",
    "RetryPayload",
    "SentRequest",
    "SessionLog",
    "SessionTree",
    "StopReason",
    "SystemPrompt",
    "TextDeltaPayload",
    "ThinkingDeltaPayload",
    "ToolCallPayload",
    "ToolEndPayload",
    "ToolResultLoop",
    "ToolStartPayload",
    "Tracing",
    "TruncatedPayload",
    "TurnEndPayload",
    "TurnResult",
    "TurnStartPayload",
    "TypedHandler",
    "agent",
    "is_flat_log",
    "recorded_model",
    "repair_log",
    "replay",
    "verify_log",
]

_LAZY = {
    "._budget": ("Budget",),
    "._builder": ("Agent", "ModelCall", "agent"),
    "._compaction": ("DefaultCompactionPipeline",),
    "._env": ("Env", "Events", "Handler", "SentRequest", "TurnResult", "TypedHandler"),
    "._events": ("PAYLOADS", "BudgetPayload", "CommittedPayload", "CompactedPayload",
                 "CompactionFailedPayload", "CompactionStartPayload", "DoomLoopPayload", "Event",
                 "EventPayload", "InterruptedPayload", "MaxIterationsPayload", "ModelReplyPayload",
                 "ModelStartPayload", "Payload", "RetryPayload", "StopReason", "TextDeltaPayload",
                 "ThinkingDeltaPayload", "ToolCallPayload", "ToolEndPayload", "ToolStartPayload",
                 "TruncatedPayload", "TurnEndPayload", "TurnStartPayload"),
    "._flatlog": ("LogHealth", "LogRepair", "is_flat_log", "repair_log", "verify_log"),
    "._loop": ("DoomLoop", "MaxIterations", "Retry", "SystemPrompt", "ToolResultLoop"),
    "._persistence": ("SessionLog", "SessionTree"),
    "._replay": ("ReplayLane", "ReplayReport", "recorded_model", "replay"),
    "._run": ("AgentStream", "AsyncAgentStream"),
    "._tools": ("DefaultToolPipeline",),
    "._tracing": ("Tracing",),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
