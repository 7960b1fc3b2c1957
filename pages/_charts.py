"""Chart helpers: show an Altair chart with PNG and SVG downloads (vl-convert)."""

from __future__ import annotations

import json
import math

import altair as alt
import pandas as pd
import streamlit as st
import vl_convert as vlc

# Points one series of a chart draws: Altair refuses data over 5,000 rows (MaxRowsError)
# and a browser draws thousands of points slowly; longer series are binned first.
MAX_CHART_POINTS = 500


@st.cache_data(max_entries=128, show_spinner=False)
def chart_bytes(spec_json: str, fmt: str) -> bytes:
    """Render a Vega-Lite spec to PNG or SVG bytes, offline."""
    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec_json, scale=2))
    return vlc.vegalite_to_svg(spec_json).encode()


def show_chart(chart: alt.TopLevelMixin, name: str, *, height: int | None = None) -> None:
    """Draw ``chart`` and offer it as ``name``.png / ``name``.svg (rendered only when clicked).
    ``height``: the element's whole height in pixels, title, axes and legend included (Streamlit
    squeezes a chart with a legend below it into its default height otherwise)."""
    # Altair's schema validation dominates a rerun; the charts are built by this
    # code from fixed encodings, so draw the unvalidated spec.
    spec = chart.to_dict(validate=False)
    st.vega_lite_chart(spec, width="stretch", **({"height": height} if height else {}))
    row = st.container(horizontal=True)
    row.download_button("PNG", data=lambda: chart_bytes(json.dumps(spec), "png"), file_name=f"{name}.png",
                       mime="image/png", key=f"dl-{name}-png", on_click="ignore")
    row.download_button("SVG", data=lambda: chart_bytes(json.dumps(spec), "svg"), file_name=f"{name}.svg",
                       mime="image/svg+xml", key=f"dl-{name}-svg", on_click="ignore")


def downsample_max(df: pd.DataFrame, *, by: str, value: str = "value",
                   max_points: int = MAX_CHART_POINTS) -> tuple[pd.DataFrame, int]:
    """At most ``max_points`` rows per ``by`` series, in order: each run of ``k``
    consecutive rows becomes its first row with the run's largest ``value`` (a step
    chart keeps its peaks).  Returns the rows and ``k`` (1: nothing binned)."""
    longest = int(df.groupby(by, sort=False).size().max()) if len(df) else 0
    k = max(1, math.ceil(longest / max_points))
    if k == 1:
        return df, 1
    parts = []
    for _, part in df.groupby(by, sort=False):
        part = part.reset_index(drop=True)
        groups = part.index // k
        first = part.groupby(groups).head(1).reset_index(drop=True)
        first[value] = part.groupby(groups)[value].max().to_numpy()
        parts.append(first)
    return pd.concat(parts, ignore_index=True), k


# One colour per GPU on every chart (Tableau 10, in the catalog's sorted order), so
# "h200-sxm" is the same colour on the roofline, in Explore and in Compare.
GPU_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
               "#bab0ac")


def gpu_colors(gpu_ids: list[str]) -> alt.Scale:
    """An Altair colour scale giving each catalog GPU its fixed colour."""
    from planner import load_catalog

    ids = sorted(load_catalog().gpus)
    domain = sorted(set(gpu_ids), key=lambda g: ids.index(g) if g in ids else len(ids))
    rng = [GPU_PALETTE[ids.index(g) % len(GPU_PALETTE)] if g in ids else "#888888" for g in domain]
    return alt.Scale(domain=domain, range=rng)
