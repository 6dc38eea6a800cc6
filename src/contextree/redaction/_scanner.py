"""One pass of every detector over a text, and the spans that win where they overlap.

Detectors run in order of trust: the shaped ones (a GitHub token is a GitHub token), then
user patterns, then secrets named by their key, then detect-secrets' plugins when installed,
then high-entropy strings. Where two spans overlap, the one from the earlier detector keeps
its characters and the later one is dropped, so ``GITHUB_TOKEN=ghp_...`` is a
``github-token``, not a keyword secret.

Each detector's spans are merged into those kept so far in one linear pass, so a text with a
million secrets costs a million steps per detector, not a million squared.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._detectors import Detector, Hit

__all__ = ["scan"]


def scan(text: str, detectors: Sequence[Detector]) -> list[Hit]:
    """The secrets of ``text``, sorted by position, no two overlapping."""
    kept: list[Hit] = []
    for detector in detectors:
        hits = sorted(detector.find(text))
        if hits:
            kept = _merge(kept, hits)
    return kept


def _merge(kept: list[Hit], hits: list[Hit]) -> list[Hit]:
    """``kept`` plus each of ``hits`` (sorted) that overlaps nothing before it."""
    out: list[Hit] = []
    j = 0
    n = len(kept)
    for hit in hits:
        start, end, _ = hit
        while j < n and kept[j][1] <= start:
            out.append(kept[j])
            j += 1
        if j < n and kept[j][0] < end:
            continue  # overlaps a span kept earlier
        if out and out[-1][1] > start:
            continue  # overlaps one of this detector's own spans
        out.append(hit)
    out.extend(kept[j:])
    return out
