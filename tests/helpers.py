"""Helpers shared by the test modules (fixtures shared by many live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""The tests folder."""

DATA = TESTS / "data"
"""Test data (``tests/data``)."""
