"""PII pre-flags: each kind found in realistic strings, and no flags on version numbers or real docs."""

import pytest

from fm_assets.transforms.text.decontam import load_eval_texts
from fm_assets.transforms.text.pii import find_pii, iban_valid, luhn_valid


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Write to Raphael Hertzog <hertzog@debian.org> for details.", "email"),
        ("Call +33 1 42 68 53 00 or (212) 555-0187 today", "phone"),
        ("the server at 212.94.201.10 answered", "ipv4"),
        ("reach 2001:67c:2564:a119::77 over IPv6", "ipv6"),
        ("card 4539 1488 0343 6467 exp 12/29", "credit_card"),
        ("card 5500-0055-5555-5559", "credit_card"),
        ("IBAN: GB82 WEST 1234 5698 7654 32", "iban"),
        ("IBAN DE89370400440532013000 please", "iban"),
        ("SSN 078-05-1120 on file", "us_ssn"),
    ],
)
def test_detects_each_kind(text, kind):
    assert find_pii(text).get(kind, 0) >= 1


def test_counts_multiple_occurrences():
    text = "a@corp.io b@corp.io, and c@mail.corp.io"
    assert find_pii(text) == {"email": 3}


@pytest.mark.parametrize(
    "text",
    [
        "Upgrade to version 2.6.32.5 of the kernel",
        "see Section 11.1.7.3, Integrating DKIM",
        "Python 3.11.2.1 and release 10.2.3.4",
        "address 192.168.0.12 netmask 255.255.255.0 gateway 10.0.0.1",
        "listening on 127.0.0.1:10023 and ::1:123 and fe80::5054:ff:fe99:1",
        "the 2001:db8::1 documentation prefix and 203.0.113.7",
        "mail jean@example.com or root@localhost or a@b.example",
        "released 2013-03-13, build 20130313-1200",
        "checksum 4111 1111 1111 1112",  # fails Luhn
        "IBAN GB82 WEST 1234 5698 7654 33",  # fails mod-97
        "SSN-like 000-12-3456 and 666-12-3456",
        "a 1.2.3.4.5 dotted run",
    ],
)
def test_no_false_positives_on_technical_strings(text):
    assert find_pii(text) == {}


def test_real_tutorial_text_has_no_pii():
    flagged = [item["id"] for item in load_eval_texts() if find_pii(item["text"])]
    assert flagged == []


def test_checksums():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765431")
    assert not iban_valid("XX82WEST12345698765432")
