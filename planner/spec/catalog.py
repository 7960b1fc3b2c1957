"""Load and validate the catalog (``catalog/*.yaml``).

The YAML files are read once per process; every entry is validated into a
frozen spec, and a bad entry raises :class:`CatalogError` naming the file, the
entry id and the field.
"""

from __future__ import annotations

import functools
import os
import statistics
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planner.errors import CatalogError, validation_message
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = [
    "PRICE_ROUNDING_USD",
    "Catalog",
    "PriceQuote",
    "catalog_dir",
    "default_price_from_quotes",
    "on_demand_quotes",
    "catalog_key",
    "get_gpu",
    "get_model",
    "load_catalog",
    "lookup_gpu_id",
    "lookup_model_id",
]

T = TypeVar("T", bound=BaseModel)


class PriceQuote(BaseModel):
    """One observed GPU-hour price with its source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    provider: str
    pricing_type: str
    usd_per_gpu_hour: float = Field(gt=0)
    as_of: str
    source_url: str


class Catalog(BaseModel):
    """All catalog entries, keyed by id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: dict[str, GpuSpec]
    models: dict[str, ModelSpec]
    prices: tuple[PriceQuote, ...]


def catalog_dir() -> Path:
    """``RIDGELINE_CATALOG_DIR`` or the ``catalog/`` folder beside ``planner/``."""
    env = os.environ.get("RIDGELINE_CATALOG_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "catalog"


def _load_entries(path: Path, adapter: TypeAdapter[Any]) -> list[Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise CatalogError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path.name}: invalid YAML: {exc}") from None
    if not isinstance(raw, list):
        raise CatalogError(f"{path.name}: expected a list of entries")
    out = []
    for i, entry in enumerate(raw):
        label = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
        try:
            out.append(adapter.validate_python(entry))
        except ValidationError as exc:
            raise CatalogError(f"{path.name}: entry {label}: {validation_message(exc)}") from None
    return out


_GPU = TypeAdapter(GpuSpec)
_MODEL = TypeAdapter(ModelSpec)
_PRICE = TypeAdapter(PriceQuote)


def _by_id(items: list[Any], kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names: dict[str, str] = {}
    for item in items:
        if item.id in out:
            raise CatalogError(f"{kind}: duplicate id '{item.id}'")
        out[item.id] = item
    for item in items:
        for alias in (item.id, *item.aliases):
            key = catalog_key(alias)
            if names.get(key, item.id) != item.id:
                raise CatalogError(f"{kind}: entry {item.id}: name '{alias}' is already {names[key]}'s")
            names[key] = item.id
    return out


def catalog_key(name: str) -> str:
    """How a name is compared with catalog ids and aliases: case and surrounding space dropped."""
    return name.strip().lower()


def _lookup(entries: dict[str, Any], name: str) -> str | None:
    if name in entries:
        return name
    key = catalog_key(name)
    for eid, spec in entries.items():
        if key == eid or key in spec.aliases:
            return eid
    return None


def lookup_model_id(name: str) -> str | None:
    """The catalog model id ``name`` names (its id or an alias, any case), else None."""
    return _lookup(load_catalog().models, name)


def lookup_gpu_id(name: str) -> str | None:
    """The catalog GPU id ``name`` names (its id or an alias, any case), else None."""
    return _lookup(load_catalog().gpus, name)


# The rule for a GPU's default price (gpus.yaml usd_per_gpu_hour) where prices.yaml
# quotes it: the median of its on-demand quotes, rounded to the nearest 5 cents.
PRICE_ROUNDING_USD = 0.05


def on_demand_quotes(prices: tuple[PriceQuote, ...], gpu_id: str) -> tuple[PriceQuote, ...]:
    """The on-demand quotes for ``gpu_id``, cheapest first (the ones a default price follows)."""
    return tuple(sorted((q for q in prices if q.gpu == gpu_id and q.pricing_type == "on_demand"),
                        key=lambda q: q.usd_per_gpu_hour))


def default_price_from_quotes(quotes: tuple[PriceQuote, ...]) -> float | None:
    """The default price the rule gives: median of the quotes' $/GPU-hour rounded
    to :data:`PRICE_ROUNDING_USD`; None without a quote."""
    if not quotes:
        return None
    median = statistics.median(q.usd_per_gpu_hour for q in quotes)
    return round(round(median / PRICE_ROUNDING_USD) * PRICE_ROUNDING_USD, 2)


def _check_prices(gpus: dict[str, GpuSpec], prices: tuple[PriceQuote, ...]) -> None:
    """Every quote names a known GPU; every default price with quotes lies within them."""
    for quote in prices:
        if quote.gpu not in gpus:
            raise CatalogError(f"prices.yaml: unknown gpu '{quote.gpu}'")
    for gpu in gpus.values():
        quotes = on_demand_quotes(prices, gpu.id)
        if not quotes:
            continue
        low, high = quotes[0].usd_per_gpu_hour, quotes[-1].usd_per_gpu_hour
        if not low <= gpu.usd_per_gpu_hour <= high:
            raise CatalogError(
                f"gpus.yaml: entry {gpu.id}: usd_per_gpu_hour {gpu.usd_per_gpu_hour:g} lies outside its on-demand "
                f"quotes in prices.yaml (${low:g}–${high:g}); the rule is their median, "
                f"${default_price_from_quotes(quotes):g}")


@functools.lru_cache(maxsize=4)
def _load(path: str) -> Catalog:
    root = Path(path)
    gpus = _by_id(_load_entries(root / "gpus.yaml", _GPU), "gpus.yaml")
    models = _by_id(_load_entries(root / "models.yaml", _MODEL), "models.yaml")
    prices = tuple(_load_entries(root / "prices.yaml", _PRICE))
    _check_prices(gpus, prices)
    return Catalog(gpus=gpus, models=models, prices=prices)


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The validated catalog (cached per folder)."""
    return _load(str(Path(path) if path else catalog_dir()))


def get_gpu(gpu_id: str) -> GpuSpec:
    """A catalog GPU by id or alias, case-insensitively; an unknown name lists the known ids."""
    cat = load_catalog()
    found = _lookup(cat.gpus, gpu_id)
    if found is None:
        raise CatalogError(
            f"unknown gpu '{gpu_id}' (known: {', '.join(sorted(cat.gpus))})"
        )
    gpu: GpuSpec = cat.gpus[found]
    return gpu


def get_model(model_id: str) -> ModelSpec:
    """A catalog model by id or alias, case-insensitively (``DeepSeek-R1-0528`` →
    deepseek-r1); an unknown name lists the known ids."""
    cat = load_catalog()
    found = _lookup(cat.models, model_id)
    if found is None:
        raise CatalogError(
            f"unknown model '{model_id}' (known: {', '.join(sorted(cat.models))})"
        )
    model: ModelSpec = cat.models[found]
    return model
