"""The card's SVG plots: one bar per fact with its exact value, labels as escaped text, same facts same bytes,
and no plotting library imported."""

from __future__ import annotations

import subprocess
import sys
from xml.etree import ElementTree

from fm_assets.datasets.card_plots import render_plots

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & co'


def _card() -> dict:
    return {
        "stages": [
            {"stage": "land", "records_out": 1200},
            {"stage": "validate", "records_out": 1180},
            {"stage": "filter", "records_out": 640},
            {"stage": "pack", "records_out": 3},
        ],
        "languages": {"en": 600, "de": 30, "fr": 10},
        "quality": {"score": "model", "curated_histogram_deciles": [0, 1, 4, 9, 30, 80, 120, 200, 150, 46]},
        "sources": [
            {"source": HOSTILE, "license": "MIT", "tokens": 2_500_000},
            {"source": "docs", "license": "CC-BY-SA-4.0", "tokens": 75_000},
        ],
    }


def _bars(svg: bytes) -> list[str]:
    root = ElementTree.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    return [
        rect.findtext(f"{SVG}title") or ""
        for rect in root.iter(f"{SVG}rect")
        if rect.find(f"{SVG}title") is not None
    ]


def test_each_plot_has_one_bar_per_fact_with_its_value() -> None:
    plots = render_plots(_card())
    assert sorted(plots) == [
        "languages.svg",
        "quality_scores.svg",
        "stage_funnel.svg",
        "tokens_by_source.svg",
    ]
    assert _bars(plots["stage_funnel.svg"]) == [
        "land: 1,200",
        "validate: 1,180",
        "filter: 640",
    ]  # not pack/shard
    assert _bars(plots["languages.svg"]) == ["en: 600", "de: 30", "fr: 10"]
    assert (
        len(_bars(plots["quality_scores.svg"])) == 10 and _bars(plots["quality_scores.svg"])[7] == "0.7: 200"
    )
    assert _bars(plots["tokens_by_source.svg"]) == [
        f"{HOSTILE} / MIT: 2,500,000",
        "docs / CC-BY-SA-4.0: 75,000",
    ]


def test_bar_lengths_follow_the_values() -> None:
    root = ElementTree.fromstring(render_plots(_card())["stage_funnel.svg"])
    heights = [
        float(r.get("height") or 0) for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None
    ]
    assert heights[0] > heights[1] > heights[2] > 0
    assert abs(heights[2] / heights[0] - 640 / 1200) < 0.01


def test_labels_are_text_never_markup_and_the_bytes_are_stable() -> None:
    svg = render_plots(_card())["tokens_by_source.svg"]
    assert b"<script" not in svg and b"&lt;script&gt;" in svg
    assert ElementTree.fromstring(svg).find(f".//{SVG}script") is None
    assert render_plots(_card()) == render_plots(_card())
    assert render_plots({"stages": [], "languages": {}, "sources": []}) == {}


def test_drawing_the_plots_imports_no_plotting_library() -> None:
    code = (
        "import sys\nfrom fm_assets.datasets.card_plots import render_plots\n"
        "render_plots({'languages': {'en': 3}})\nprint('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
