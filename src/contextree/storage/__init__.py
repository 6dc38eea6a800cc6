"""Storage backends: one protocol, several places to keep a session's entries."""

from .base import Storage, TreeIndex
from .jsonl import JsonlStorage, TornLineWarning
from .memory import MemoryStorage

__all__ = ["JsonlStorage", "MemoryStorage", "Storage", "TornLineWarning", "TreeIndex"]
