"""Default prices follow their quotes: the median of a GPU's on-demand quotes
rounded to $0.05, never outside them, and the report's price row cites them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from planner.errors import CatalogError
from planner.spec.catalog import default_price_from_quotes, load_catalog, on_demand_quotes
from planner.spec.scenario import Scenario
from planner.views.report import review_report

CATALOG = Path(__file__).resolve().parents[1] / "catalog"


QUOTED = sorted(g for g in load_catalog().gpus if on_demand_quotes(load_catalog().prices, g))


def test_the_quoted_gpus_are_the_datasheet_ones() -> None:
    assert {"h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb"} <= set(QUOTED)


@pytest.mark.parametrize("gpu_id", QUOTED)
def test_every_quoted_default_lies_within_its_quotes_by_the_rule(gpu_id: str) -> None:
    cat = load_catalog()
    quotes = on_demand_quotes(cat.prices, gpu_id)
    price = cat.gpus[gpu_id].usd_per_gpu_hour
    assert quotes[0].usd_per_gpu_hour <= price <= quotes[-1].usd_per_gpu_hour
    assert price == pytest.approx(default_price_from_quotes(quotes))


@pytest.mark.parametrize(("gpu_id", "usd"), [
    ("h100-sxm", 3.00),  # median of 2.79, 2.99, 3.00, 3.90 = 2.995 -> 3.00
    ("h200-sxm", 2.75),  # median of 2.25, 3.29 = 2.77 -> 2.75
    ("b200", 3.75),      # the one quote
    ("a100-sxm-80gb", 1.30),  # median of 1.10, 1.50
])
def test_the_rule_by_hand(gpu_id: str, usd: float) -> None:
    assert default_price_from_quotes(on_demand_quotes(load_catalog().prices, gpu_id)) == usd


def test_a_default_outside_its_quotes_is_refused(tmp_path: Path) -> None:
    for name in ("gpus.yaml", "models.yaml", "prices.yaml"):
        shutil.copy(CATALOG / name, tmp_path / name)
    text = (tmp_path / "gpus.yaml").read_text()
    (tmp_path / "gpus.yaml").write_text(text.replace("usd_per_gpu_hour: 2.75", "usd_per_gpu_hour: 3.50", 1))
    with pytest.raises(CatalogError, match=r"gpus.yaml: entry h200-sxm: usd_per_gpu_hour 3.5 lies outside its "
                                           r"on-demand quotes in prices.yaml \(\$2.25–\$3.29\)"):
        load_catalog(tmp_path)


def test_report_price_row_carries_its_source() -> None:
    rep = review_report(Scenario(gpu="h200-sxm", model="llama-3.1-8b"))
    price = next(s for s in rep.sources if s.what == "Price")
    assert price.url.startswith("https://")
    assert "median of the 2 on-demand quotes below ($2.25, $3.29)" in price.note
    estimate = next(s for s in review_report(Scenario(gpu="l40s", model="llama-3.1-8b")).sources
                    if s.what == "Price")
    assert "estimate" in estimate.note
