"""detect-secrets' plugins behind their gate: imported only for a text that may hold what
they find, the same secrets found as with the plugins loaded from the start."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextree.redaction import Redactor
from contextree.redaction._plugins import _SKIPPED, MODULES, PluginGate, plugin_detectors
from contextree.redaction._prefilter import Prefilter

pytest.importorskip("detect_secrets", reason="the `secrets` extra is not installed")

PATTERNS = plugin_detectors(True)


def test_the_modules_named_are_the_registry_s() -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    used = sorted((t, c) for t, c in get_mapping_from_secret_type_to_class().items()
                  if c.__name__ not in _SKIPPED and issubclass(c, RegexBasedDetector))
    assert sorted({c.__module__.rsplit(".", 1)[1] for _, c in used}) == sorted(MODULES)
    assert [p.source for p in PATTERNS] == [p.pattern for _, c in used for p in c.denylist]


def _gates(plain: bool, monkeypatch: pytest.MonkeyPatch) -> Prefilter[PluginGate]:
    if plain:  # as without google-re2: substring searches and Python's re
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "re2", None)
            return Prefilter([PluginGate()])
    return Prefilter([PluginGate()])


@pytest.mark.parametrize("plain", [False, True], ids=["re2", "plain"])
@pytest.mark.parametrize("k", range(len(PATTERNS)), ids=[p.kind for p in PATTERNS])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_plugin_match_passes_the_gate(k: int, plain: bool, data: st.DataObject,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = PATTERNS[k]
    pattern = plugin._slow
    try:
        text = data.draw(st.from_regex(pattern))
    except Exception:  # a construct the generator cannot draw from: its own test below
        pytest.skip(f"hypothesis cannot draw from {pattern.pattern!r}")
    if list(plugin.find(text)):
        assert _gates(plain, monkeypatch).select(text), (plugin.kind, text)


def test_a_text_without_a_plugin_shape_imports_no_plugin() -> None:
    code = textwrap.dedent("""
        import sys
        from contextree.redaction import Redactor
        r = Redactor()
        out = r.texts(["pytest -x passed in 3.2s", "see https://example.com/docs", "ok"] * 100)
        assert out[0] == "pytest -x passed in 3.2s", out[0]
        print("detect_secrets" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_text_that_passes_the_gate_gets_the_plugins() -> None:
    token = "AKC" + "p" * 3 + "9Qz" * 4  # the shape of an Artifactory API token
    text = f"artifactory token {token} done"
    assert Redactor(detect_secrets=False).text(text) == text  # no built-in detector knows it
    out = Redactor().text(text)
    assert token not in out and "[REDACTED:artifactory-credentials:1]" in out


def test_the_gate_finds_what_the_loaded_plugins_find() -> None:
    token = "AKC" + "p" * 3 + "9Qz" * 4
    texts = ["nothing here", f"key {token} ", "twilio AC" + "0a" * 16, "plain words again",
             "password reset", "x" * 100]
    assert Redactor().texts(texts) == Redactor(detect_secrets=True).texts(texts)


def test_threads_at_the_gate_at_once_each_get_the_plugins() -> None:
    token = "AKC" + "p" * 3 + "9Qz" * 4
    red = Redactor()
    start = threading.Barrier(8)
    outs: list[str] = []

    def run() -> None:
        start.wait()
        outs.append(red.text(f"key {token} "))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outs) == 8 and all(token not in o and "artifactory" in o for o in outs)
