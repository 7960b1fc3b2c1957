"""The report's charts: Vega-Lite specs rendered offline to SVG by vl-convert
(its own fonts, no network), embedded in the HTML as images.

Labels are placed only where there is room (one per bar, the operating point
alone on a curve), bars are coloured by GPU, axes carry their units.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from planner.sizing.plan import Plan
from planner.spec.scenario import Scenario, resolve_gpu
from planner.views.curves import batch_curve, hbm_accounting, log_grid, memory_breakdown, roof_lines
from planner.views.report.alternatives import Alternative
from planner.views.report.numbers import count, is_number, quantity, usd

__all__ = ["CHART_WIDTH_PX", "Chart", "report_charts", "svg_data_uri"]

CHART_WIDTH_PX = 620  # fits an A4 page's text width at 96 dpi with the margins of the print CSS
CHART_HEIGHT_PX = 260
BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
_CONFIG: dict[str, Any] = {"font": "sans-serif", "view": {"stroke": None}, "axis": {"labelFontSize": 11},
                           # labelLimit 0: a legend label is never cut ("headroom (1 − utilization)")
                           "legend": {"labelFontSize": 11, "orient": "bottom", "labelLimit": 0, "columns": 3}}


@dataclass(frozen=True)
class Chart:
    title: str
    caption: str
    svg: str  # the rendered image (an SVG document)


def svg_data_uri(svg: str) -> str:
    """The SVG as a ``data:`` URI for an <img> (scripts inside never run there)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")


def _render(spec: dict[str, Any]) -> str:
    import vl_convert as vlc  # imported on use: the first call starts its engine (~2 s)

    full = {"width": CHART_WIDTH_PX, "height": CHART_HEIGHT_PX, "config": _CONFIG, **spec}
    return str(vlc.vegalite_to_svg(json.dumps(full)))


def _alternatives(alts: tuple[Alternative, ...]) -> dict[str, Any] | None:
    rows = [{"option": f"{a.option}: {a.layout}, {a.mode}", "gpu": a.gpu, "usd": a.usd_value,
             "label": f"{usd(a.usd_value)} · {count(a.gpus_value)} GPUs"}
            for a in alts if a.usd_value is not None and a.gpus_value is not None]
    if not rows:
        return None
    y = {"field": "option", "type": "nominal", "sort": None, "title": None, "axis": {"labelLimit": 320}}
    return {
        "data": {"values": rows}, "height": 26 * len(rows),
        "layer": [
            {"mark": {"type": "bar"}, "encoding": {
                "y": y, "x": {"field": "usd", "type": "quantitative", "title": "$ per million output tokens"},
                "color": {"field": "gpu", "type": "nominal", "title": "GPU", "sort": "ascending"}}},
            {"mark": {"type": "text", "align": "left", "dx": 4, "fontSize": 11},
             "encoding": {"y": y, "x": {"field": "usd", "type": "quantitative"}, "text": {"field": "label"}}},
        ],
    }


def _latency(s: Scenario, p: Plan) -> dict[str, Any]:
    d = p.decode
    batches = sorted({*BATCHES, d.batch_size})
    rows = [{"itl_ms": r["itl_s"] * 1e3, "tok_s": r["tok_s_per_replica"],
             "kv": "fits the KV budget" if r["fits"] else "beyond the KV budget"}
            for r in batch_curve(s, batches=batches)]
    x = {"field": "itl_ms", "type": "quantitative", "title": "ITL, ms (decode step at the batch)"}
    y = {"field": "tok_s", "type": "quantitative", "title": "tokens/s per replica", "axis": {"format": ",.0f"}}
    # the operating point on the curve it is drawn over: the decode step at the plan's batch (the
    # operating point's own ITL adds the interleaved prefill chunks, which the curve does not)
    op = {"itl_ms": d.itl_s * 1e3, "tok_s": d.tok_s_per_replica, "label": f"operating point: batch {d.batch_size:,}"}
    return {"layer": [
        {"data": {"values": rows}, "mark": {"type": "line", "point": True},
         "encoding": {"x": x, "y": y, "color": {"field": "kv", "type": "nominal", "title": None}}},
        {"data": {"values": [{"itl_ms": s.slo.itl_s * 1e3, "label": f"ITL target {quantity(s.slo.itl_s, 's')}"}]},
         "mark": {"type": "rule", "color": "#c0392b", "strokeDash": [6, 4]}, "encoding": {"x": {"field": "itl_ms",
                                                                                                 "type": "quantitative"}}},
        {"data": {"values": [op]}, "mark": {"type": "point", "shape": "diamond", "size": 160, "filled": True,
                                            "color": "#c0392b"}, "encoding": {"x": x, "y": y}},
        {"data": {"values": [op]}, "mark": {"type": "text", "align": "right", "dx": -10, "dy": -8, "fontSize": 11},
         "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
    ]}


def _memory(s: Scenario) -> dict[str, Any]:
    rows = [{"part": r["part"], "gb": r["bytes"] / 1e9, "order": i, "label": quantity(r["bytes"], "bytes")}
            for i, r in enumerate(memory_breakdown(s))]
    hbm = hbm_accounting(s)
    title = f"GB (10⁹ bytes) of one GPU's {quantity(hbm['bytes'], 'bytes')} HBM, {hbm['basis']}"
    return {"data": {"values": rows}, "height": 60, "mark": {"type": "bar"}, "encoding": {
        "x": {"field": "gb", "type": "quantitative", "stack": "zero", "title": title},
        "color": {"field": "part", "type": "nominal", "title": None, "sort": [r["part"] for r in rows]},
        "order": {"field": "order", "type": "quantitative"},
        "tooltip": [{"field": "part"}, {"field": "label"}]}}


def _roofline(s: Scenario, p: Plan) -> dict[str, Any]:
    gpu = resolve_gpu(s)
    roofs, ridges = roof_lines(gpus=[gpu], weights_dtypes=[s.weights_dtype],
                               intensities=log_grid(low=1.0, high=1e5, points=60))
    r = p.roofline
    pts: list[dict[str, Any]] = [{"intensity": r.decode_intensity_flop_per_byte, "flops": r.decode_attainable_flops_per_s,
            "label": f"decode, batch {p.decode.batch_size:,}"},
           {"intensity": r.prefill_intensity_flop_per_byte, "flops": r.peak_flops_per_s if r.prefill_bound == "compute"
            else r.prefill_intensity_flop_per_byte * r.hbm_bytes_per_s, "label": f"prefill, {p.prefill.tokens:,} tokens"}]
    pts = [q for q in pts if is_number(q["intensity"]) and is_number(q["flops"]) and q["flops"] > 0]
    x = {"field": "intensity", "type": "quantitative", "scale": {"type": "log"},
         "title": "arithmetic intensity, FLOP/byte"}
    y = {"field": "flops", "type": "quantitative", "scale": {"type": "log"}, "title": "attainable FLOP/s",
         "axis": {"format": "~s"}}
    line = [{"intensity": q["intensity_flop_per_byte"], "flops": q["attainable_flops_per_s"]} for q in roofs]
    ridge = [{"intensity": q["intensity_flop_per_byte"], "flops": q["attainable_flops_per_s"],
              "label": f"ridge {count(q['intensity_flop_per_byte'])} FLOP/byte"} for q in ridges]
    return {"layer": [
        {"data": {"values": line}, "mark": {"type": "line", "color": "#2c7fb8"}, "encoding": {"x": x, "y": y}},
        {"data": {"values": ridge}, "mark": {"type": "text", "align": "left", "dx": 6, "dy": 12, "fontSize": 11},
         "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
        {"data": {"values": pts}, "mark": {"type": "point", "filled": True, "size": 90, "color": "#c0392b"},
         "encoding": {"x": x, "y": y}},
        {"data": {"values": pts}, "mark": {"type": "text", "align": "left", "dx": 8, "dy": -8, "fontSize": 11},
         "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
    ]}


def report_charts(s: Scenario, p: Plan, alts: tuple[Alternative, ...]) -> tuple[Chart, ...]:
    """The key charts of a review, rendered."""
    out: list[Chart] = []
    spec = _alternatives(alts)
    if spec is not None:
        out.append(Chart("Alternatives: $ per million output tokens",
                         "Options that meet the SLO, coloured by GPU; each bar's label is its $/Mtok and GPU count.",
                         _render(spec)))
    out.append(Chart("Throughput vs ITL as the decode batch grows",
                     f"Dashed line: the ITL target; diamond: the plan's operating point ({p.fleet.mode}).",
                     _render(_latency(s, p))))
    out.append(Chart("Memory of one GPU", "Weights, engine overheads, KV budget and headroom, stacked.",
                     _render(_memory(s))))
    out.append(Chart(f"Roofline of {p.gpu} ({p.roofline.compute_dtype})",
                     "Decode and prefill at the plan's batch and prompt on the GPU's roof; the ridge marks where "
                     "memory-bound turns compute-bound.", _render(_roofline(s, p))))
    return tuple(out)
