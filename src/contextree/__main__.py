"""``python -m contextree``: the offline demo (``demo``), or the command line for the rest."""

from __future__ import annotations

import importlib
import sys


def main() -> None:
    if sys.argv[1:2] == ["demo"]:
        from .demo import run_demo

        run_demo()
        return
    try:
        cli = importlib.import_module("contextree.cli")
    except ImportError:
        sys.exit("usage: python -m contextree demo")
    cli.main()


if __name__ == "__main__":
    main()
