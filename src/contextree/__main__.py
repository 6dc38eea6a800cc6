"""``python -m contextree``: the same as the ``contextree`` command."""

from .cli import main

if __name__ == "__main__":
    main()
