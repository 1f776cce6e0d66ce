"""The dataset card's plots as SVG bar charts, written directly (no plotting library on the release path).

Each plot is a small, deterministic SVG (same card facts, same bytes): a title, an axis with a few round
ticks, one bar per item with its exact value in a tooltip (``<title>``), and the item labels. Every label
comes from the card's facts (stage names, language codes, source names and licences, some user-supplied)
and is XML-escaped, so a label is always text in the image, never markup. Rendering all four plots takes
milliseconds; drawing them with matplotlib cost ~1.5 s per release (mostly its import).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

MAX_LANGUAGES = 12
WIDTH = 700
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'
COLORS = {"funnel": "#4c72b0", "languages": "#55a868", "quality": "#c44e52", "sources": "#8172b2"}


def _text(value: Any) -> str:
    return escape(str(value), {'"': "&quot;"})


def _clip(label: str, chars: int) -> str:
    """A label as drawn (the tooltip keeps it whole): long source names must not run off the image."""
    return label if len(label) <= chars else label[: chars - 1] + "…"


def _ticks(top: float) -> list[float]:
    """Round tick values from 0 to at least ``top`` (4-6 of them)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(math.ceil(top / step) + 1)]


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _svg(height: int, body: list[str], title: str) -> bytes:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" {FONT} font-size="11">'
    )
    lines = [
        head,
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{WIDTH / 2:.1f}" y="18" text-anchor="middle" font-size="13">{_text(title)}</text>',
        *body,
        "</svg>",
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def column_chart(
    title: str, labels: Sequence[str], values: Sequence[float], *, y_label: str, x_label: str = "", color: str
) -> bytes:
    """Vertical bars, one per label (labels slanted under the axis)."""
    height, left, right, top, bottom = 320, 70, 20, 30, 90
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    ticks = _ticks(max(values, default=0))
    scale = plot_h / ticks[-1]
    base = top + plot_h
    body = [f'<line x1="{left}" y1="{base}" x2="{WIDTH - right}" y2="{base}" stroke="black"/>']
    for tick in ticks:
        y = base - tick * scale
        body.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="black"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(tick)}</text>')
    slot = plot_w / max(1, len(labels))
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x, h = left + i * slot + slot * 0.1, value * scale
        body.append(
            f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{slot * 0.8:.1f}" height="{h:.1f}" fill="{color}">'
            f"<title>{_text(label)}: {_number(value)}</title></rect>"
        )
        cx = left + (i + 0.5) * slot
        body.append(
            f'<text x="{cx:.1f}" y="{base + 14}" text-anchor="end" '
            f'transform="rotate(-40 {cx:.1f} {base + 14})">{_text(_clip(label, 16))}</text>'
        )
    body.append(
        f'<text x="16" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2:.1f})">{_text(y_label)}</text>'
    )
    if x_label:
        body.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">{_text(x_label)}</text>'
        )
    return _svg(height, body, title)


def bar_chart(
    title: str, labels: Sequence[Sequence[str]], values: Sequence[float], *, x_label: str, color: str
) -> bytes:
    """Horizontal bars, one per item; each label may have several lines (source, licence)."""
    left, right, top, row = 230, 30, 30, 40
    height = top + row * max(1, len(labels)) + 45
    plot_w = WIDTH - left - right
    ticks = _ticks(max(values, default=0))
    scale = plot_w / ticks[-1]
    base = height - 45
    body = [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="black"/>']
    for tick in ticks:
        x = left + tick * scale
        body.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="black"/>')
        body.append(f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle">{_number(tick)}</text>')
    for i, (lines, value) in enumerate(zip(labels, values, strict=True)):
        y, w = top + i * row + row * 0.15, value * scale
        name = " / ".join(lines)
        body.append(
            f'<rect x="{left}" y="{y:.1f}" width="{w:.1f}" height="{row * 0.7:.1f}" fill="{color}">'
            f"<title>{_text(name)}: {_number(value)}</title></rect>"
        )
        first = y + row * 0.35 - 6 * (len(lines) - 1) + 4
        spans = "".join(
            f'<tspan x="{left - 6}" y="{first + 12 * k:.1f}">{_text(_clip(line, 36))}</tspan>'
            for k, line in enumerate(lines)
        )
        body.append(f'<text text-anchor="end">{spans}</text>')
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">{_text(x_label)}</text>'
    )
    return _svg(height, body, title)


def _stage_funnel(card: dict[str, Any]) -> bytes:
    stages = [row for row in card["stages"] if row["stage"] not in ("pack", "shard")]
    return column_chart(
        "documents after each stage",
        [r["stage"] for r in stages],
        [r["records_out"] for r in stages],
        y_label="documents kept",
        color=COLORS["funnel"],
    )


def _languages(card: dict[str, Any]) -> bytes:
    items = list(card["languages"].items())[:MAX_LANGUAGES]
    return column_chart(
        "language of the curated documents",
        [lang for lang, _ in items],
        [n for _, n in items],
        y_label="documents",
        color=COLORS["languages"],
    )


def _quality(card: dict[str, Any]) -> bytes:
    histogram = card["quality"]["curated_histogram_deciles"]
    return column_chart(
        "quality-score distribution of the curated documents",
        [f"{i / 10:.1f}" for i in range(len(histogram))],
        histogram,
        y_label="documents",
        x_label=f"quality score ({card['quality']['score']}), decile start",
        color=COLORS["quality"],
    )


def _tokens_by_source(card: dict[str, Any]) -> bytes:
    sources = card["sources"]
    return bar_chart(
        "tokens per source and licence",
        [(str(s["source"]), str(s["license"])) for s in sources],
        [s["tokens"] for s in sources],
        x_label="tokens in shards",
        color=COLORS["sources"],
    )


def render_plots(card: dict[str, Any]) -> dict[str, bytes]:
    """File name -> SVG bytes for every plot the card's facts support."""
    plots = {}
    if card.get("stages"):
        plots["stage_funnel.svg"] = _stage_funnel(card)
    if card.get("languages"):
        plots["languages.svg"] = _languages(card)
    if any(card.get("quality", {}).get("curated_histogram_deciles", [])):
        plots["quality_scores.svg"] = _quality(card)
    if card.get("sources"):
        plots["tokens_by_source.svg"] = _tokens_by_source(card)
    return plots
