"""normalize_text: NFC, control characters, whitespace; idempotent on any input (hypothesis)."""

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_assets.transforms.text.normalize import normalize_text


def test_nfc_composes_decomposed_accents():
    decomposed = "Rapha\u0065\u0308l and cafe\u0301"
    assert normalize_text(decomposed) == "Raphaël and café"


def test_crlf_controls_and_blank_lines():
    raw = "  Title\r\n\r\n\r\n\r\nline\x00 one\x07\t\tand  two   \r\nend\x0c\n\n\n"
    assert normalize_text(raw) == "Title\n\nline one and two\nend"


def test_leading_indentation_of_code_is_kept():
    code = "def f(x):\n    if x:\n        return  1\n"
    assert normalize_text(code) == "def f(x):\n    if x:\n        return 1"


def test_unicode_line_separators_become_newlines():
    assert normalize_text("a\u2028b\u2029c") == "a\nb\nc"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_idempotent_and_clean(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert unicodedata.is_normalized("NFC", once)
    assert not any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in once)
    assert "\n\n\n" not in once
    assert once == once.strip()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "é", "e\u0301", " ", "\t", "\n", "\r", "\r\n", "\x00", "  x"]), max_size=40
    )
)
def test_idempotent_on_whitespace_heavy_text(parts):
    once = normalize_text("".join(parts))
    assert normalize_text(once) == once
