"""The dataset card's plots as PNG bytes (matplotlib, Agg backend, no wall-clock or version in the file, so
the same card facts give the same bytes)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

PNG_METADATA = {"Software": None}  # matplotlib writes its version here by default
MAX_LANGUAGES = 12


def _png(draw: Callable[[Any], None], size: tuple[float, float] = (7.0, 3.2)) -> bytes:
    import matplotlib  # imported when a card is drawn, not with the code location

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=size, dpi=100)
    try:
        draw(axes)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata=PNG_METADATA)
        return buffer.getvalue()
    finally:
        plt.close(figure)


def _stage_funnel(card: dict[str, Any]) -> bytes:
    stages = [row for row in card["stages"] if row["stage"] not in ("pack", "shard")]

    def draw(axes: Any) -> None:
        axes.bar([r["stage"] for r in stages], [r["records_out"] for r in stages], color="#4c72b0")
        axes.set_ylabel("documents kept")
        axes.set_title("documents after each stage")
        axes.tick_params(axis="x", rotation=45)

    return _png(draw)


def _languages(card: dict[str, Any]) -> bytes:
    items = list(card["languages"].items())[:MAX_LANGUAGES]

    def draw(axes: Any) -> None:
        axes.bar([lang for lang, _ in items], [n for _, n in items], color="#55a868")
        axes.set_ylabel("documents")
        axes.set_title("language of the curated documents")

    return _png(draw)


def _quality(card: dict[str, Any]) -> bytes:
    histogram = card["quality"]["curated_histogram_deciles"]

    def draw(axes: Any) -> None:
        axes.bar([f"{i / 10:.1f}" for i in range(len(histogram))], histogram, color="#c44e52", align="edge")
        axes.set_xlabel(f"quality score ({card['quality']['score']}), decile start")
        axes.set_ylabel("documents")
        axes.set_title("quality-score distribution of the curated documents")

    return _png(draw)


def _tokens_by_source(card: dict[str, Any]) -> bytes:
    sources = card["sources"]

    def draw(axes: Any) -> None:
        labels = [f"{s['source']}\n{s['license']}" for s in sources]
        axes.barh(labels, [s["tokens"] for s in sources], color="#8172b2")
        axes.set_xlabel("tokens in shards")
        axes.set_title("tokens per source and licence")

    return _png(draw, (7.0, 1.2 + 0.5 * max(1, len(sources))))


def render_plots(card: dict[str, Any]) -> dict[str, bytes]:
    """File name -> PNG bytes for every plot the card's facts support."""
    plots = {}
    if card.get("stages"):
        plots["stage_funnel.png"] = _stage_funnel(card)
    if card.get("languages"):
        plots["languages.png"] = _languages(card)
    if any(card.get("quality", {}).get("curated_histogram_deciles", [])):
        plots["quality_scores.png"] = _quality(card)
    if card.get("sources"):
        plots["tokens_by_source.png"] = _tokens_by_source(card)
    return plots
