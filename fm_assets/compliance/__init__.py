"""Compliance records and rules: namespaces and quarantine promotions, the licence policy, revocations and
their blast radius. Plain Python over the object store (no Dagster); the release, the views, the land stage,
the blocklist side input and the CLI read them."""
