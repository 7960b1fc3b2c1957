"""The review report as one self-contained HTML file: inline CSS, charts as
embedded SVG images, no scripts, no external resources (a Content-Security-
Policy says so to the browser), every text HTML-escaped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from planner.views.report.charts import Chart, report_charts, svg_data_uri
from planner.views.report.content import ReportRow, ReviewReport

__all__ = ["CSP", "report_html"]

# Nothing loads from anywhere: styles inline, images as data: URIs, no scripts.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_LINK_SCHEMES = ("https://", "http://")

_CSS = """
@page { size: A4; margin: 14mm 12mm; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2630;
       max-width: 960px; margin: 0 auto; padding: 16px; line-height: 1.4; font-size: 14px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d5dbe1;
  padding-bottom: 4px; } h3 { font-size: 15px; margin: 16px 0 6px; }
.meta { color: #5b6773; margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; font-size: 13px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid #e3e7eb; }
th { background: #f3f5f7; font-weight: 600; } td.num { text-align: right; white-space: nowrap;
  font-variant-numeric: tabular-nums; }
tr.plan td { background: #eef6ff; font-weight: 600; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #d5dbe1; border-radius: 6px; padding: 10px 14px; min-width: 150px; flex: 1; }
.card .label { color: #5b6773; font-size: 12px; } .card .value { font-size: 24px; font-weight: 600; }
.card .note { color: #5b6773; font-size: 12px; }
.pass { color: #1e7b34; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.warn { background: #fff6e0; border-left: 4px solid #e0a100; padding: 6px 10px; margin: 4px 0; list-style: none; }
ul.warnings { padding: 0; }
figure { margin: 12px 0 18px; page-break-inside: avoid; } figure img { max-width: 100%; height: auto; }
figcaption { color: #5b6773; font-size: 12px; }
code, .formula { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
.link { word-break: break-all; font-size: 12px; }
section { page-break-inside: auto; } tr { page-break-inside: avoid; }
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _link(url: str, text: str | None = None) -> str:
    """A link only for http(s) addresses (never javascript: or data:); anything else as text."""
    label = _e(text if text is not None else url)
    if url.lower().startswith(_LINK_SCHEMES):
        return f'<a href="{_e(url)}">{label}</a>'
    return label


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Sequence[int] = (),
           classes: Iterable[str] | None = None) -> str:
    """A table from already-escaped cells."""
    cls = list(classes) if classes is not None else None
    out = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        attr = f' class="{cls[i]}"' if cls and cls[i] else ""
        cells = "".join(f'<td class="num">{c}</td>' if j in numeric else f"<td>{c}</td>" for j, c in enumerate(row))
        out.append(f"<tr{attr}>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _rows(rows: Iterable[ReportRow]) -> str:
    return _table(("", "Value", "Note"), ([_e(r.label), _e(r.value), _e(r.note)] for r in rows))


def _cards(rows: Iterable[ReportRow]) -> str:
    cards = []
    for r in rows:
        key = r.label.lower().replace("$/", "usd-per-").replace(" ", "-")
        cards.append(f'<div class="card" data-key="{_e(key)}"><div class="label">{_e(r.label)}</div>'
                     f'<div class="value">{_e(r.value)}</div><div class="note">{_e(r.note)}</div></div>')
    return '<div class="cards">' + "".join(cards) + "</div>"


def _figure(chart: Chart) -> str:
    return (f'<figure><h3>{_e(chart.title)}</h3><img alt="{_e(chart.title)}" src="{svg_data_uri(chart.svg)}">'
            f"<figcaption>{_e(chart.caption)}</figcaption></figure>")


def report_html(report: ReviewReport, *, charts: bool = True) -> str:
    """The whole report as one HTML document (``charts=False`` leaves the images out)."""
    r = report
    verdict_cls = "pass" if r.feasible else "fail"
    slo = _table(("Target", "Value checked", "Statistic", "Result"),
                 ([_e(c.label), _e(c.value), _e(c.note),
                   f'<span class="{"pass" if c.passed else "fail"}">{"pass" if c.passed else "fail"}</span>']
                  for c in r.slo_rows), numeric=(1,))
    alts = _table(("Option", "GPU", "Layout", "Mode", "GPUs", "$/Mtok output", "p90 TTFT", "ITL", "SLO"),
                  ([_e(a.option), _e(a.gpu), _e(a.layout), _e(a.mode), _e(a.gpus_total), _e(a.usd_per_mtok_output),
                    _e(a.ttft_p90), _e(a.itl), _e(a.verdict)] for a in r.alternatives),
                  numeric=(4, 5, 6, 7), classes=["plan" if a.is_plan else "" for a in r.alternatives])
    groups: dict[str, list[list[str]]] = {}
    for d in r.derivations:
        groups.setdefault(d.group, []).append(
            [_e(d.label), f'<span class="formula">{_e(d.formula)}</span>',
             f'<span class="formula">{_e(d.substituted)}</span>', _e(d.value), _e(d.origin)])
    derivations = "".join(f"<h3>{_e(g)}</h3>" + _table(("Quantity", "Formula", "With the values", "Result", "Origin"),
                                                       rows, numeric=(3,)) for g, rows in groups.items())
    warnings = ('<ul class="warnings">' + "".join(f'<li class="warn">{_e(w)}</li>' for w in r.warnings) + "</ul>"
                if r.warnings else "<p>None: the plan raised no warning.</p>")
    sources = _table(("What", "Entry", "Source", "Note"),
                     ([_e(s.what), _e(s.name), _link(s.url) if s.url else "—", _e(s.note)] for s in r.sources))
    figures = "".join(_figure(c) for c in report_charts(r.scenario_model, r.plan, r.alternatives)) if charts else ""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="Ridgeline">',
        f"<title>{_e(r.title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{_e(r.title)}</h1><p class=\"meta\">Generated {_e(r.generated_at)} by Ridgeline · "
        f"{_link(r.share_url, 'open this scenario in Ridgeline')}</p></header>",
        f'<section id="answer"><h2>The answer</h2>{_cards(r.answer)}'
        f'<p>SLO: <span class="{verdict_cls}">{_e(r.verdict)}</span></p></section>',
        f'<section id="slo"><h2>SLO check</h2>{slo}</section>',
        f'<section id="scenario"><h2>Scenario</h2>{_rows(r.scenario)}</section>',
        f'<section id="fleet"><h2>Recommended fleet</h2>{_rows(r.fleet)}</section>',
        f'<section id="cost"><h2>Cost</h2>{_rows(r.cost)}</section>',
        (f'<section id="deployment"><h2>Deployment</h2><p class="meta">The commands that run the plan '
         f'(<code>python -m planner deploy --target</code> writes them with their manifests).</p>'
         f"{_table(('Pool', 'Command', 'Note'), ([_e(d.label), f'<code>{_e(d.value)}</code>', _e(d.note)] for d in r.deployment))}"
         "</section>") if r.deployment else "",
        f'<section id="alternatives"><h2>Alternatives compared</h2><p>{_e(r.alternatives_note)}</p>{alts}'
        "<p class=\"meta\">p90 TTFT includes queueing at the planned utilization; ITL is the mean at each "
        "option's operating batch.</p></section>",
        f'<section id="charts"><h2>Charts</h2>{figures}</section>' if figures else "",
        f'<section id="derivations"><h2>How the numbers were derived</h2>{derivations}</section>',
        f'<section id="assumptions"><h2>Assumptions</h2>{_rows(r.assumptions)}</section>',
        f'<section id="warnings"><h2>Warnings</h2>{warnings}</section>',
        f'<section id="sources"><h2>Catalog sources</h2>{sources}</section>',
        f'<footer><h2>Share link</h2><p>This link reopens the scenario in Ridgeline with every input as '
        f'reviewed:</p><p class="link">{_link(r.share_url)}</p></footer>',
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
