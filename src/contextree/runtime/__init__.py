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
"""

from ._builder import Agent, ModelCall, agent
from ._compaction import DefaultCompactionPipeline
from ._env import Env, Events, TurnResult
from ._events import PAYLOADS, Event
from ._flatlog import LogHealth, LogRepair, repair_log, verify_log
from ._loop import DoomLoop, MaxIterations, Retry, SystemPrompt, ToolResultLoop
from ._persistence import SessionLog, SessionTree
from ._tools import DefaultToolPipeline

__all__ = [
    "PAYLOADS",
    "Agent",
    "DefaultCompactionPipeline",
    "DefaultToolPipeline",
    "DoomLoop",
    "Env",
    "Event",
    "Events",
    "LogHealth",
    "LogRepair",
    "MaxIterations",
    "ModelCall",
    "Retry",
    "SessionLog",
    "SessionTree",
    "SystemPrompt",
    "ToolResultLoop",
    "TurnResult",
    "agent",
    "repair_log",
    "verify_log",
]
