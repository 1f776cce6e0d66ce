"""The PII patterns (first character first, lookbehind after it) find exactly what their plain
lookbehind-first definitions find: same spans, same groups, in the same order, on generated text."""

import random
import re

import pytest

from fm_assets.transforms.text import pii

# The definitions as first written: a lookbehind, then the pattern (tried at every position by ``re``).
PLAIN = {
    "_EMAIL": r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})\b",
    "_IPV4": r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)",
    "_IPV6_CANDIDATE": r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:.])",
    "_PHONE": r"(?<![\w+.-])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]?\d{2,4}){1,4}"
    r"|\(\d{3}\)\s?\d{3}[.-]\d{4}"
    r"|\d{3}[.-]\d{3}[.-]\d{4}"
    r")(?![\w.-]?\d)",
    "_CARD": r"(?<![\w.-])(?:\d[ -]?){12,18}\d(?![\w.]|-\d)",
    "_IBAN": r"\b([A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)\b",
    "_SSN": r"(?<![\w-])(\d{3})-(\d{2})-(\d{4})(?![\w-])",
}

# Characters the patterns care about, plus a non-ASCII letter and digit (``\w`` and ``\d`` are Unicode).
ALPHABET = "0123456789" * 6 + "..--  ++(()):::@%_\n\tabcdefABCDEFGBZxyz" + "é٣"
SEPARATORS = ["", " ", " ", "\n", ".", "-", ":", "x", "1"]
# Pieces that make matches likely: area codes, dotted quads, hex groups, IBAN and e-mail fragments.
PIECES = [
    "555-123-4567",
    "(212) 555-0187",
    "(55-123-4567",  # near misses: a '(' or '+' that must not start another branch
    "+1 (555) 123-4567",
    "1.2.3.4.5",
    "fe80::5054:ff:fe99:1",
    "+33 1 42 68 53 00",
    "212.94.201.10",
    "2001:67c:2564:a119::77",
    "::1",
    "4539 1488 0343 6467",
    "5500-0055-5555-5559",
    "GB82 WEST 1234 5698 7654 32",
    "DE89370400440532013000",
    "078-05-1120",
    "jean@debian.org",
    "a.b@c.io",
]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5:
                parts.append(rng.choice(PIECES))
            else:
                parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))))
        texts.append("".join(part + rng.choice(SEPARATORS) for part in parts))
    return texts


def _found(pattern: re.Pattern, text: str) -> list[tuple]:
    return [(m.span(), m.groups()) for m in pattern.finditer(text)]


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_pattern_finds_what_its_plain_definition_finds(name):
    plain = re.compile(PLAIN[name])
    fast = getattr(pii, name)
    matched = 0
    for text in _texts(seed=len(name), count=4000):
        expected = _found(plain, text)
        assert _found(fast, text) == expected, text
        matched += len(expected)
    assert matched > 150  # the generated text exercises the pattern, not only its misses


def test_match_at_the_very_start_and_end_of_the_text():
    for name, source in PLAIN.items():
        plain, fast = re.compile(source), getattr(pii, name)
        for piece in PIECES:
            for text in (piece, piece + ".", "x" + piece, "-" + piece, " " + piece + " "):
                assert _found(fast, text) == _found(plain, text), (name, text)


GATED = {"_EMAIL": "email", "_IPV4": "ipv4", "_IPV6_CANDIDATE": "ipv6", "_PHONE": "phone", "_SSN": "us_ssn"}


@pytest.mark.parametrize("name", sorted(GATED))
def test_every_match_holds_a_gate(name):
    """A document without any gate of a kind is skipped, which is exact only if every match holds one."""
    kind, pattern = GATED[name], getattr(pii, name)
    matches = [m.group(0) for text in _texts(seed=7, count=4000) + PIECES for m in pattern.finditer(text)]
    assert len(matches) > 150
    assert [m for m in matches if not pii._may_match(kind, m)] == []
    assert not pii._may_match(kind, "no digits, no colons, no at-signs here")
