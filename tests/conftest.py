"""Test-suite settings: hypothesis runs the same examples on every run (CI stays
deterministic); set HYPOTHESIS_PROFILE=explore to search new ones locally."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
