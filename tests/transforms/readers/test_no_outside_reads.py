"""A landed document never pulls in another file it names: HTML/XML external entities and XInclude stay text."""

from __future__ import annotations

from fm_assets.transforms.readers import RawRecord, iter_raw_records


def test_html_external_entity_and_xinclude_are_not_resolved(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    page = tmp_path / "page.html"
    page.write_text(
        f'<!DOCTYPE html [<!ENTITY e SYSTEM "file://{secret}">]><html><body><p>before &e; after</p>'
        f'<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="{secret}" parse="text"/>'
        "</body></html>"
    )
    records = list(iter_raw_records(page))
    assert records and all(isinstance(r, RawRecord) for r in records)
    text = "".join(r.text or "" for r in records if isinstance(r, RawRecord))
    assert "before" in text and "after" in text
    assert "TOP-SECRET" not in text
