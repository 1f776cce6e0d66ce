"""The per-namespace PII policy: redact, drop or keep; every decision logged with the policy version."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.pii_preflag import DECISIONS_PREFIX, STAGE, pii_actions
from fm_assets.stages.registry import TEXT_STAGES
from fm_assets.transforms.text.pii import find_pii_spans
from fm_assets.transforms.text.pii_policy import PiiPolicy, PiiPolicyError, load_policy, redact

FILLER = "The service keeps its configuration in a plain text file that is read once at start. " * 8
WITH_EMAIL = FILLER + "Write to maria.lopez@acme-mail.de or call +49 30 1234 5678 for access."
WITH_CARD = FILLER + "The card 4539 1488 0343 6467 was charged twice."
CLEAN = FILLER + "Nothing personal here at all."


def test_redact_replaces_every_span_with_its_typed_placeholder():
    text = "mail bob@corp.io, card 4539 1488 0343 6467, again bob@corp.io."
    redacted = redact(text, find_pii_spans(text))
    assert redacted == "mail <EMAIL>, card <CREDIT_CARD>, again <EMAIL>."
    assert redact("John Smith", {"person": [(0, 10)], "location": [(5, 10)]}) == "<PERSON>"


def test_policy_parse_and_version():
    policy = PiiPolicy.parse({"default": {"action": "keep"}, "namespaces": {"cloud": {"action": "drop"}}})
    assert policy.rule("cloud").action == "drop" and policy.rule("elsewhere").action == "keep"
    assert policy.version != PiiPolicy.parse({"default": {"action": "keep"}}).version
    with pytest.raises(PiiPolicyError, match="namespace cloud: action 'scrub'"):
        PiiPolicy.parse({"namespaces": {"cloud": {"action": "scrub"}}})
    assert load_policy().rule("on_device").action == "drop"  # the bundled policy


def _run_pii(tmp_path, namespace: str, policy_yaml: str, texts: list[str]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy_yaml)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    store = ObjectStore(str(tmp_path / "root"))
    batch = land_batch(store, source, source="s", license_id="MIT", namespace=namespace).batch
    settings = PipelineConfigResource(progress=False, pii_policy_file=str(policy_file))
    for stage in TEXT_STAGES:
        outcome = materialize(stage, StageContext(store, batch, settings, {})).outcome
        if stage is STAGE:
            break
    success = outcome.success
    rows = [row for part in success.parts for row in pq.read_table(store.local_path(part)).to_pylist()]
    decision_files = [name for name in success.files if name.startswith(DECISIONS_PREFIX)]
    decisions = [
        row
        for name in decision_files
        for row in pq.read_table(store.local_path(layout.in_output(success.prefix, name))).to_pylist()
    ]
    return success, rows, decisions, PiiPolicy.parse(yaml.safe_load(policy_yaml))


def test_redact_policy_rewrites_flagged_documents_and_logs_each_decision(tmp_path):
    success, rows, decisions, policy = _run_pii(
        tmp_path, "cloud", "namespaces: {cloud: {action: redact}}\n", [WITH_EMAIL, WITH_CARD, CLEAN]
    )
    texts = sorted(row["text"] for row in rows)
    assert len(rows) == 3 and not any("maria.lopez" in t or "4539 1488" in t for t in texts)
    assert any(t.endswith("Write to <EMAIL> or call <PHONE> for access.") for t in texts)
    assert sorted(json.loads(row["pii_flags"]) for row in rows if row["pii_flags"]) == [
        ["credit_card"],
        ["email", "phone"],
    ]
    assert sorted((d["kinds"], d["spans"], d["action"]) for d in decisions) == [
        (["credit_card"], 1, "redact"),
        (["email", "phone"], 2, "redact"),
    ]
    assert {d["policy_version"] for d in decisions} == {policy.version}
    assert success.config["pii_policy"]["version"] == policy.version
    assert pii_actions(success) == {"redact": 2}


def test_drop_policy_rejects_flagged_documents_with_the_policy_version(tmp_path):
    success, rows, decisions, policy = _run_pii(
        tmp_path, "on_device", "namespaces: {on_device: {action: drop}, cloud: {action: keep}}\n",
        [WITH_EMAIL, CLEAN, CLEAN + " again"],
    )  # fmt: skip
    assert len(rows) == 2 and success.rejects_by_reason == {"pii_policy_drop": 1}
    assert success.counts.records_in == success.counts.records_out + success.counts.records_rejected == 3
    assert [(d["action"], d["namespace"], d["policy_version"]) for d in decisions] == [
        ("drop", "on_device", policy.version)
    ]


def test_keep_policy_only_flags_and_a_policy_change_changes_the_key(tmp_path):
    kept, rows, decisions, _ = _run_pii(tmp_path / "a", "cloud", "default: {action: keep}\n", [WITH_EMAIL])
    assert rows[0]["text"] == WITH_EMAIL and decisions[0]["action"] == "keep"
    redacted, *_ = _run_pii(tmp_path / "b", "cloud", "default: {action: redact}\n", [WITH_EMAIL])
    assert kept.key != redacted.key


def test_ner_pass_redacts_names_and_places_on_flagged_documents(tmp_path):
    pytest.importorskip("presidio_analyzer")
    text = FILLER + "Contact John Smith in Amsterdam at john.smith@acme-mail.de about the rollout."
    success, rows, decisions, _ = _run_pii(
        tmp_path, "cloud", "namespaces: {cloud: {action: redact, ner: flagged}}\n", [text, CLEAN]
    )
    redacted = next(row["text"] for row in rows if row["pii_flags"])
    assert "John Smith" not in redacted and "Amsterdam" not in redacted
    assert "<PERSON>" in redacted and "<LOCATION>" in redacted and "<EMAIL>" in redacted
    assert decisions[0]["detectors"] == "regex+ner" and success.extra["ner_checked_docs"] == 1
    assert "presidio-analyzer=" in success.config["ner"]
