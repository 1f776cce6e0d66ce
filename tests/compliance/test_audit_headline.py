"""The audit's headline separates blocking check failures (the batch is held back) from warnings."""

from __future__ import annotations

from fm_assets.reports.audit import blocks_release, check_verdict, markdown_header

INTEGRITY = {"ok": True, "checked": "sizes"}


def audit_with(blocking: list[str], warning: list[str]) -> dict:
    return {
        "dataset": None,
        "failed_blocking_checks": blocking,
        "failed_warning_checks": warning,
        "integrity": INTEGRITY,
    }


def test_blocking_and_warning_checks_come_from_the_stage_definitions() -> None:
    assert blocks_release("pack", "packing_efficiency")
    assert not blocks_release("pii_preflag", "pii_prevalence")  # warn-level: the batch goes on


def test_the_headline_says_whether_anything_blocked() -> None:
    assert check_verdict(audit_with([], [])) == "all checks passed"
    warned = check_verdict(audit_with([], ["b1/pii_preflag/pii_prevalence"]))
    assert warned.startswith("no blocking check failed") and "1 warning-level check(s) failed" in warned
    assert "FAILED" not in warned
    blocked = check_verdict(audit_with(["b2/pack/packing_efficiency"], ["b1/pii_preflag/pii_prevalence"]))
    assert blocked.startswith("1 BLOCKING CHECK(S) FAILED") and "held back" in blocked
    assert "1 warning-level" in blocked
    assert f"Result: {warned}." in markdown_header(audit_with([], ["b1/pii_preflag/pii_prevalence"]))[2]
