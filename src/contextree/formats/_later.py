"""``Later``: a function of a format module, imported when it is first called.

The format table lists every built-in format with its reader, writer, detector and home.
Naming those functions at once would import every format module (Claude Code's, Codex's,
opencode's database code, the HTML export...) for an import of one pi file; a ``Later``
stands in for each, so the table costs nothing until a format is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Later"]


class Later:
    """Calls ``module.name`` (imported on the first call; the same function after)."""

    __slots__ = ("_function", "module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self._function: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = self._function
        if function is None:  # two threads may both import it: the same function either way
            function = self._function = getattr(importlib.import_module(self.module),
                                                self.name)
        return function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.module}.{self.name}, imported when first called>"
