"""The ``contextree`` command line (``contextree --help``); ``main`` is the console script."""

# The imports register the commands; their order is the order of ``--help``.
# isort: off
from . import (commands_demo, commands_read, commands_edit, commands_compact,  # noqa: F401
               commands_interop, commands_db, chat)
from .app import app, main

# isort: on
from .._public import publish

__all__ = ["app", "main"]

publish(globals())
