r"""PII detection: find likely personal data by kind, with character spans (what the PII policy redacts).

Kinds: ``email``, ``phone``, ``ipv4``, ``ipv6``, ``credit_card`` (Luhn + issuer prefix), ``iban``
(country length + ISO 7064 mod-97), ``us_ssn``.

False positives on technical documentation are kept low on purpose:
- IP addresses count only when ``ipaddress`` calls them globally routable: private, loopback,
  link-local, multicast, netmask-like and the RFC 5737 / RFC 3849 documentation ranges are
  examples, not someone's address.
- Dotted version numbers look like IPv4 (``1.2.3.4``, kernel ``2.6.32.5``). A dotted quad is
  skipped when it is part of a longer dotted run (``1.2.3.4.5``), when a version word (version,
  release, kernel, python, v, ...) precedes it closely, or when every octet is below 64: section
  numbers ("see 11.1.7.3") and versions live there, and so does only 0.4% of the address space.
- IPv6 counts only global unicast (2000::/3) addresses, which drops ``::1:123`` (netstat's
  address:port), ``fe80::`` and the ``2001:db8::`` documentation prefix.
- Emails at reserved example domains (example.com/.org/.net, *.example, *.test, *.invalid,
  *.localhost) are placeholders and do not count.
- Phone numbers need a phone shape (leading ``+``, a parenthesised area code, or the 3-3-4 NANP
  grouping) and 10-15 digits, so dates, ISO timestamps and version strings do not match.

Speed: every pattern begins by consuming one character of a small set (a digit, ``[+(\d]``, an
upper-case letter, a hex digit or colon) and only then checks what precedes it, with a lookbehind that
spans that character: ``\d(?<![\w.]\d)`` instead of ``(?<![\w.])\d``. Both accept exactly the same
strings, but a pattern that starts with a character set lets ``re`` jump from one candidate character to
the next, where one that starts with a lookbehind is tried at every position of the document (three
times the CPU on real text). Most kinds also have gates: short patterns that start with a literal (which
``re`` finds with a fast scan), at least one of which occurs inside every match of the kind's pattern
(every IPv4 match holds ``.d.d.``, every SSN ``-dd-``). A document with no gate cannot match, so the full
pattern only runs on the few that have one. ``tests/transforms/text/test_pii_patterns.py`` holds each
pattern to its plain lookbehind-first form and checks that every match contains a gate.
"""

from __future__ import annotations

import ipaddress
import re

PII_KINDS = ("email", "phone", "ipv4", "ipv6", "credit_card", "iban", "us_ssn")

_EMAIL = re.compile(
    r"[A-Za-z0-9](?<![\w.+-][A-Za-z0-9])[A-Za-z0-9._%+-]{0,63}@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})\b"
)
_RESERVED_EMAIL_DOMAIN = re.compile(
    r"(^|\.)(example\.(com|org|net|edu)|example|test|invalid|localhost|local|localdomain)$", re.IGNORECASE
)

_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w]|\.\d)")
_VERSION_CONTEXT = re.compile(
    r"(?:\bversions?|\breleases?|\bkernel|\blinux|\bpython|\bpackage|\bupgrade|\bupdate|\bbuild|"
    r"\bv|\bver|\bpatch|\bfirmware)[\s:=_-]*\(?$",
    re.IGNORECASE,
)
# (?:[hex]{0,4}:){2,7}[hex]{0,4} with its first character taken first: a colon ends the first group,
# a hex digit starts it (a run that starts with a hex digit cannot be empty).
_IPV6_CANDIDATE = re.compile(
    r"[0-9A-Fa-f:](?<![\w:.][0-9A-Fa-f:])(?:(?<=:)|(?<=[0-9A-Fa-f])[0-9A-Fa-f]{0,3}:)"
    r"(?:[0-9A-Fa-f]{0,4}:){1,6}[0-9A-Fa-f]{0,4}(?![\w:.])"
)
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

_PHONE = re.compile(
    r"(?<![\w+.-])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]?\d{2,4}){1,4}"  # +33 1 23 45 67 89
    r"|\(\d{3}\)\s?\d{3}[\s.-]\d{4}"  # (555) 123-4567
    r"|\d{3}[.-]\d{3}[.-]\d{4}"  # 555-123-4567
    r")(?![\w.-]?\d)"
)

_CARD = re.compile(r"\d(?<![\w.-]\d)[ -]?(?:\d[ -]?){11,17}\d(?![\w.]|-\d)")
_CARD_PREFIX = re.compile(r"^(4|5[1-5]|2[2-7]|3[47]|6(011|5|4[4-9])|35|30[0-5]|36|38)")

_IBAN = re.compile(r"([A-Z](?<!\w[A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)\b")
# ISO 13616 lengths per country (the common SEPA + a few others).
_IBAN_LENGTHS = {
    "AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22, "DK": 18,
    "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21, "HU": 28, "IE": 22,
    "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31, "NL": 18,
    "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
    "AE": 23, "BR": 29, "IL": 23, "SA": 24, "UA": 29,
}  # fmt: skip

_SSN = re.compile(r"(\d(?<![\w-]\d)\d\d)-(\d{2})-(\d{4})(?![\w-])")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    iban = candidate.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


Span = tuple[int, int]  # [start, end) character offsets

# Per kind: every match of the kind's pattern contains a match of at least one of these.
_GATES: dict[str, tuple[re.Pattern[str], ...]] = {
    "email": (re.compile("@"),),
    "ipv4": (re.compile(r"\.\d{1,3}\.\d{1,3}\."),),  # the dots after the first three octets
    "ipv6": (re.compile(r":[0-9A-Fa-f]{0,4}:"),),  # two of the candidate's colons
    "phone": (  # the three shapes: +33..., (555) 123-4567, 555-123-4567 / 555.123.4567
        re.compile(r"\+\d"),
        re.compile(r"\(\d{3}\)"),
        re.compile(r"\.\d{3}[.-]\d"),
        re.compile(r"-\d{3}[.-]\d"),
    ),
    "us_ssn": (re.compile(r"-\d\d-"),),
}


def _may_match(kind: str, text: str) -> bool:
    """False when ``text`` holds none of the kind's gates: then its pattern cannot match either."""
    return any(gate.search(text) for gate in _GATES[kind])


def _emails(text: str) -> list[Span]:
    if not _may_match("email", text):
        return []
    return [m.span() for m in _EMAIL.finditer(text) if not _RESERVED_EMAIL_DOMAIN.search(m.group(1))]


def _ipv4s(text: str) -> list[Span]:
    if not _may_match("ipv4", text):
        return []
    spans = []
    for m in _IPV4.finditer(text):
        octets = m.group(0).split(".")
        if all(int(o) < 64 for o in octets):  # 1.2.3.4, 2.6.32.5, "Section 11.1.7.3": numbering
            continue
        if any(len(o) > 1 and o.startswith("0") for o in octets):
            continue
        if _VERSION_CONTEXT.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        try:
            addr = ipaddress.IPv4Address(m.group(0))
        except ValueError:
            continue
        if addr.is_global and not addr.is_multicast:
            spans.append(m.span())
    return spans


def _ipv6s(text: str) -> list[Span]:
    if not _may_match("ipv6", text):
        return []
    spans = []
    for m in _IPV6_CANDIDATE.finditer(text):
        candidate = m.group(0)
        if candidate.count(":") < 2 or sum(c in "0123456789abcdefABCDEF" for c in candidate) < 4:
            continue
        try:
            addr = ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        if addr in _GLOBAL_UNICAST and addr.is_global:
            spans.append(m.span())
    return spans


def _phones(text: str) -> list[Span]:
    if not _may_match("phone", text):
        return []
    return [m.span() for m in _PHONE.finditer(text) if 10 <= sum(ch.isdigit() for ch in m.group(0)) <= 15]


def _cards(text: str) -> list[Span]:
    spans = []
    for m in _CARD.finditer(text):
        raw = m.group(0)
        if " " in raw and "-" in raw:  # mixed separators: a number table, not a card
            continue
        digits = re.sub(r"\D", "", raw)
        if (
            13 <= len(digits) <= 19
            and _CARD_PREFIX.match(digits)
            and len(set(digits)) > 2
            and luhn_valid(digits)
        ):
            spans.append(m.span())
    return spans


def _ibans(text: str) -> list[Span]:
    return [m.span(1) for m in _IBAN.finditer(text) if iban_valid(m.group(1))]


def _ssns(text: str) -> list[Span]:
    if not _may_match("us_ssn", text):
        return []
    spans = []
    for m in _SSN.finditer(text):
        area, group, serial = m.groups()
        if area in ("000", "666") or area.startswith("9") or group == "00" or serial == "0000":
            continue
        spans.append(m.span())
    return spans


_FINDERS = {
    "email": _emails,
    "phone": _phones,
    "ipv4": _ipv4s,
    "ipv6": _ipv6s,
    "credit_card": _cards,
    "iban": _ibans,
    "us_ssn": _ssns,
}


def find_pii_spans(text: str) -> dict[str, list[Span]]:
    """Spans per PII kind found in ``text``; kinds with no match are left out ({} = nothing found)."""
    found: dict[str, list[Span]] = {}
    for kind, finder in _FINDERS.items():
        spans = finder(text)
        if spans:
            found[kind] = spans
    return found


def find_pii(text: str) -> dict[str, int]:
    """Counts per PII kind found in ``text``; kinds with no match are left out ({} = nothing found)."""
    return {kind: len(spans) for kind, spans in find_pii_spans(text).items()}
