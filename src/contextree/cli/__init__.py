"""The ``contextree`` command line (``contextree --help``); ``main`` is the console script."""

# The imports register the commands; their order is the order of ``--help``.
# isort: off
from . import (commands_demo, commands_read, commands_edit, commands_compact,
               commands_interop, commands_db, chat)
from .app import app, main

# isort: on

__all__ = ["app", "chat", "commands_compact", "commands_db", "commands_demo", "commands_edit",
           "commands_interop", "commands_read", "main"]
