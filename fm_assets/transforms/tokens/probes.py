"""Probe strings for the build-time self-test of a fast encoder: the places where BPE implementations differ.

Curated probes cover unicode (scripts, combining marks, emoji with modifiers and joiners, astral planes,
private use), whitespace runs of every Unicode space (before letters, at the end, mixed with newlines),
digits of several scripts, the contractions of the GPT-2 regex, control characters, long repeats (merge
tie-breaking) and the tokenizer's own added tokens in context. ``random_probes`` adds seeded mixes of the
same pools, so the set is the same on every machine.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e"

CURATED = (
    "",
    " ",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  two leading spaces, two trailing  ",
    "tabs\t\tand\t \tspaces \t",
    "line\nbreaks\n\n\nand\r\nCRLF\r\n\r\n",
    "   \n   \n\t\t\n",
    "a  b   c    d     e",
    " " * 64 + "x" + "\n" * 33,
    "don't I'll we've they're I'M she'S it’s 'tis ''",
    "12345 3.14159 1,000,000 0x1F 1e-9 2024-01-31 007",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲ ०१२३ ①②③ ²³ ½ Ⅻ 𝟘𝟙",
    "Ünïcödé naïve café résumé Ångström façade",
    "東京都は日本の首都です。 中文，标点！ 한국어 텍스트",
    "Привет, мир! Ελληνικά κείμενα. עברית ‏ العربية ‎ فارسی",
    "हिन्दी देवनागरी ภาษาไทย ქართული ᐃᓄᒃᑎᑐᑦ",
    "e\u0301 a\u0308 n\u0303\u0323 Z\u0351\u0352\u0353 \u0e01\u0e34\u0e4a",
    "😀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ #️⃣ 🇫🇷",
    "\U00010000\U0001d400\U0001f9ff\U000e0001\U0010fffd \ue000\uf8ff\ufffd\uffff",
    "\x00\x01\x07\x08\x1b[31mred\x1b[0m\x7f",
    "\u200b zero\u200cwidth\u200djoin\u2060er\ufeff",
    "mixed\u00a0nbsp\u2003em\u3000ideographic\u202fnarrow",
    "a" * 300,
    "ab" * 150 + " " + "aba" * 50,
    "=" * 80 + "\n" + "-" * 80,
    "https://example.org/path?q=1&r=%20x#frag user@example.com",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
    '<html><body class="x">&amp;&lt;&#x27;</body></html>',
    "...!!!???---___***;;;:::",
)

POOLS = (
    tuple(chr(c) for c in range(0x20, 0x7F)),
    tuple(SPACES + ZERO_WIDTH),
    tuple(chr(c) for c in range(0xA0, 0x250)),
    tuple(chr(c) for c in range(0x300, 0x370)),
    tuple(chr(c) for c in (*range(0x600, 0x6FF), *range(0x900, 0x97F), *range(0xE00, 0xE7F))),
    tuple(chr(c) for c in (*range(0x3040, 0x3100), *range(0x4E00, 0x4E80), *range(0xAC00, 0xAC40))),
    (*(chr(c) for c in range(0x1F300, 0x1F650)), "\u200d", "\ufe0f", "\U0001f3fd"),
    ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "’s", "'"),
    (*"0123456789", "٣", "①", "²", "Ⅻ", "𝟘", "〇", "१"),
    tuple(
        chr(c) for c in (*range(0x10000, 0x10080), *range(0x1D400, 0x1D440), 0xE000, 0xF8FF, 0xFFFD, 0x10FFFD)
    ),
    tuple(chr(c) for c in (*range(0x00, 0x20), 0x7F)),
)


def random_probes(count: int, seed: int = 0, extra: Iterable[str] = ()) -> list[str]:
    """``count`` seeded mixes of the pools (plus ``extra`` pieces, e.g. added tokens), up to 48 pieces each."""
    rng = random.Random(seed)
    pools = [*POOLS, tuple(extra)] if extra else list(POOLS)
    probes = []
    for _ in range(count):
        chosen = rng.sample(pools, rng.randint(1, min(4, len(pools))))
        probes.append("".join(rng.choice(rng.choice(chosen)) for _ in range(rng.randint(0, 48))))
    return probes


def added_token_probes(contents: Iterable[str]) -> list[str]:
    """Each added token alone, glued to text, between spaces, repeated, and cut short."""
    probes = []
    for token in contents:
        probes += [
            token,
            f"x{token}y",
            f" {token} ",
            f"{token}{token}",
            f"a\n{token}\nb",
            token[:-1],
            f" {token[1:]}",
        ]
    return probes


def probe_strings(added_tokens: Iterable[str] = (), random_count: int = 400) -> list[str]:
    added = list(added_tokens)
    return [*CURATED, *added_token_probes(added), *random_probes(random_count, extra=added)]
