"""Licences: landing takes SPDX expressions or LicenseRef- only, and the release policy admits by namespace."""

from __future__ import annotations

import datetime as dt

import pytest

from fm_assets.compliance import paths
from fm_assets.compliance.licence_policy import DEFAULT_POLICY, PolicyError, load_policy, parse_policy
from fm_assets.engine import spdx
from fm_assets.engine.landing import LandingError, read_batch_manifest


@pytest.mark.parametrize("licence", ["Proprietary", "All-Rights-Reserved", "proprietary license", "MIT AND"])
def test_landing_refuses_what_is_not_spdx_and_says_what_to_write(land, licence):
    with pytest.raises(LandingError, match="SPDX") as refused:
        land("acme", licence)
    if licence != "MIT AND":
        assert "LicenseRef-" in str(refused.value)


@pytest.mark.parametrize(
    ("licence", "stored"),
    [
        ("mit", "MIT"),
        ("GPL-2.0-or-later OR CC-BY-SA-3.0", "GPL-2.0-or-later OR CC-BY-SA-3.0"),
        ("LicenseRef-Acme-Internal", "LicenseRef-Acme-Internal"),
        ("NOASSERTION", "NOASSERTION"),
        ("Apache-2.0 WITH LLVM-exception", "Apache-2.0 WITH LLVM-exception"),
    ],
)
def test_landing_stores_the_canonical_spelling(store, land, licence, stored):
    assert read_batch_manifest(store, land("acme", licence)).license == stored


def test_categories_come_from_the_shipped_licence_index():
    assert spdx.category("MIT") == "Permissive"
    assert spdx.category("CC-BY-SA-4.0") == "Copyleft Limited"
    assert spdx.category("CC-BY-NC-4.0") not in {
        "Permissive",
        "Copyleft",
        "Copyleft Limited",
        "Public Domain",
    }
    assert spdx.category("LicenseRef-Acme") is None


POLICY = parse_policy(DEFAULT_POLICY.read_text(), "default")


@pytest.mark.parametrize(
    ("licence", "namespace", "admitted"),
    [
        ("MIT", "cloud", True),
        ("CC-BY-SA-4.0", "cloud", True),  # share-alike
        ("GPL-3.0-only", "cloud", True),
        ("GPL-3.0-only", "on_device", False),  # strong copyleft is not shipped on devices
        ("GPL-2.0-or-later OR CC-BY-SA-3.0", "on_device", True),  # one admitted side is enough
        ("MIT AND CC-BY-NC-4.0", "cloud", False),  # both sides must be
        ("CC-BY-NC-4.0", "cloud", False),
        ("LicenseRef-Proprietary", "cloud", False),
        ("NOASSERTION", "cloud", False),
        ("MIT", "quarantine", False),  # never a release namespace
    ],
)
def test_default_policy(licence, namespace, admitted):
    decision = POLICY.decide(licence, "src", namespace)
    assert decision.admitted is admitted, decision.reason
    if not admitted:
        assert decision.reason


def test_refusal_names_the_licence_and_its_family():
    reason = POLICY.decide("CC-BY-NC-4.0", "src", "cloud").reason
    assert "CC-BY-NC-4.0" in reason and "outside the cloud release policy" in reason


EXCEPTIONS = """
namespaces:
  cloud: {categories: [Permissive]}
exceptions:
  - {license: LicenseRef-Acme-Internal, source: acme, namespace: cloud, approver: jane, reason: LEGAL-1}
  - {license: NOASSERTION, source: "*", namespace: cloud, approver: joe, reason: LEGAL-2, expires: 2020-01-01}
"""


def test_an_exception_admits_exactly_its_licence_source_and_namespace():
    policy = parse_policy(EXCEPTIONS, "test")
    admitted = policy.decide("LicenseRef-Acme-Internal", "acme", "cloud")
    assert admitted.admitted and admitted.exception is not None and admitted.exception.approver == "jane"
    assert not policy.decide("LicenseRef-Acme-Internal", "other-source", "cloud").admitted
    assert not policy.decide("LicenseRef-Acme-Internal", "acme", "on_device").admitted


def test_an_expired_exception_admits_nothing_and_says_so():
    decision = parse_policy(EXCEPTIONS, "test").decide("NOASSERTION", "x", "cloud", today=dt.date(2026, 1, 1))
    assert not decision.admitted and "expired on 2020-01-01" in decision.reason


@pytest.mark.parametrize(
    "entry",
    [
        "{license: MIT, namespace: cloud, reason: r}",  # no approver
        "{license: MIT, namespace: cloud, approver: a}",  # no reason
        "{license: Proprietary, namespace: cloud, approver: a, reason: r}",  # not SPDX
        "{license: MIT, namespace: cloud, approver: a, reason: r, expires: soon}",
    ],
)
def test_an_exception_without_approver_reason_or_valid_fields_is_refused(entry):
    with pytest.raises(PolicyError):
        parse_policy(f"namespaces: {{}}\nexceptions:\n  - {entry}\n", "test")


def test_a_root_policy_overrides_the_default(store):
    assert load_policy(store).origin == str(DEFAULT_POLICY)
    store.write_bytes(paths.licence_policy(), EXCEPTIONS.encode())
    policy = load_policy(store)
    assert policy.origin.endswith("compliance/licence_policy.yaml")
    assert not policy.decide("CC-BY-SA-4.0", "x", "cloud").admitted
