"""normalize_text: NFC, control characters, whitespace; idempotent on any input (hypothesis)."""

import re
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


def _normalize_line_by_line(text: str) -> str:
    """The plain definition: each line's inner blank runs (after a non-blank) collapsed, then right-trimmed."""
    inner = re.compile(r"(?<=\S)[ \t]*\t[ \t]*|(?<=\S) {2,}")
    text = re.sub(r"\r\n|\r|\u2028|\u2029|\x85", "\n", text)
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "", text)
    text = unicodedata.normalize("NFC", text)
    text = "\n".join(inner.sub(" ", line).rstrip(" \t") for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "b.",
                "é",
                "e\u0301",
                " ",
                " ",
                "  ",
                "\t",
                "\n",
                "\n\n",
                "\r",
                "\r\n",
                "\x0b",
                "\x85",
                "\u2028",
            ]
        ),
        max_size=40,
    )
)
def test_whole_text_rewrite_equals_the_line_by_line_definition(parts):
    text = "".join(parts)
    assert normalize_text(text) == _normalize_line_by_line(text)
