"""The ``contextree`` command line (``contextree --help``); ``main`` is the console script."""

# The command modules register their commands when a command is first looked up
# (``app.COMMANDS`` lists them, in the order of ``--help``): none is imported here.
from .._public import publish
from .app import app, main

__all__ = ["app", "main"]

publish(globals())
