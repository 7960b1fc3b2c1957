"""The catalog loads, carries the contracted ids, and its numbers hold up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner import CatalogError, ModelSpec, load_catalog, param_counts
from planner.spec.hf_import import load_hf_config

HF = Path(__file__).parent / "data" / "hf"

GPU_IDS = {"h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "a100-sxm-80gb", "l40s", "b200", "mi300x"}
MODEL_IDS = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-3.1-405b", "qwen2.5-72b", "mixtral-8x7b",
             "qwen3-30b-a3b", "deepseek-v3", "llama-2-7b", "llama-2-70b"}


def test_contracted_ids_present() -> None:
    cat = load_catalog()
    assert GPU_IDS <= set(cat.gpus)
    assert MODEL_IDS <= set(cat.models)


@pytest.mark.parametrize("model_id", sorted(MODEL_IDS))
def test_param_count_within_1_5_percent_of_published(model_id: str) -> None:
    m = load_catalog().models[model_id]
    assert m.published_params is not None
    assert param_counts(m).total == pytest.approx(m.published_params, rel=0.015)
    if m.published_active_params:
        assert param_counts(m).active == pytest.approx(m.published_active_params, rel=0.03)


def test_every_entry_has_a_source() -> None:
    cat = load_catalog()
    for entry in list(cat.gpus.values()) + list(cat.models.values()):
        assert entry.source_url.startswith("http"), entry.id
        assert entry.source_note, entry.id


def test_dense_not_sparse_flops() -> None:
    # H100 SXM dense BF16 is 989 TFLOP/s; the 1,979 datasheet headline is 2:4 sparse.
    h100 = load_catalog().gpus["h100-sxm"]
    assert h100.flops_per_s.bf16 == pytest.approx(989e12)
    assert load_catalog().gpus["a100-sxm-80gb"].flops_per_s.fp8 is None


def test_moe_models_know_experts() -> None:
    cat = load_catalog()
    dsv3 = cat.models["deepseek-v3"]
    assert dsv3.attention == "mla" and dsv3.kv_lora_rank == 512 and dsv3.qk_rope_head_dim == 64
    assert (cat.models["mixtral-8x7b"].experts, cat.models["mixtral-8x7b"].experts_per_token) == (8, 2)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-72b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"])
def test_hf_import_matches_catalog(name: str) -> None:
    spec = ModelSpec.from_hf_config(load_hf_config(HF / f"{name}.json"))
    assert param_counts(spec).total == pytest.approx(param_counts(load_catalog().models[name]).total, rel=1e-9)
    assert param_counts(spec).active == pytest.approx(param_counts(load_catalog().models[name]).active, rel=1e-9)


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c.pop("num_hidden_layers"), "num_hidden_layers"),
        (lambda c: c.update(num_key_value_heads=5), "num_key_value_heads"),
        (lambda c: c.update(hidden_size=4095), "hidden_size"),
        (lambda c: c.update(model_type="gpt2"), "model_type"),
        (lambda c: c.update(intermediate_size=-1), "intermediate_size"),
    ],
)
def test_hf_import_rejects_bad_config(edit, key: str) -> None:
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    edit(cfg)
    with pytest.raises(CatalogError, match=key):
        ModelSpec.from_hf_config(cfg)


def test_moe_import_rejects_topk_above_experts() -> None:
    cfg = json.loads((HF / "mixtral-8x7b.json").read_text())
    cfg["num_experts_per_tok"] = 9
    with pytest.raises(CatalogError, match="num_experts_per_tok"):
        ModelSpec.from_hf_config(cfg)


def test_bad_catalog_entry_names_field(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "catalog"
    gpus = yaml.safe_load((root / "gpus.yaml").read_text())
    gpus[0]["hbm_bytes_per_s"] = -1
    (tmp_path / "gpus.yaml").write_text(yaml.safe_dump(gpus))
    for name in ("models.yaml", "prices.yaml"):
        (tmp_path / name).write_text((root / name).read_text())
    with pytest.raises(CatalogError, match="h100-sxm.*hbm_bytes_per_s"):
        load_catalog(tmp_path)


def test_driver_memory_is_the_datasheet_memory_in_bytes(tmp_path: Path) -> None:
    """A GPU's driver-reported memory is its datasheet capacity within CUDA_VISIBLE_RATIO
    (a GiB-labelled "GB" reads 7.4% above it); a figure in MiB, or another card's, is refused
    naming the field."""
    from planner.spec.specs import CUDA_VISIBLE_RATIO

    stated = {g.id: g.cuda_visible_hbm_bytes / g.hbm_bytes for g in load_catalog().gpus.values()
              if g.cuda_visible_hbm_bytes is not None}
    assert {"h100-sxm", "h200-sxm", "b200", "b300", "gb200", "gb300"} <= set(stated)
    assert all(CUDA_VISIBLE_RATIO[0] <= r <= CUDA_VISIBLE_RATIO[1] for r in stated.values())
    assert stated["b200"] > 1.06  # 182,642 MiB against "180 GB"
    root = Path(__file__).resolve().parents[1] / "catalog"
    gpus = yaml.safe_load((root / "gpus.yaml").read_text())
    b200 = next(g for g in gpus if g["id"] == "b200")
    b200["cuda_visible_hbm_bytes"] = 182642.0  # MiB, not bytes
    (tmp_path / "gpus.yaml").write_text(yaml.safe_dump(gpus))
    for name in ("models.yaml", "prices.yaml"):
        (tmp_path / name).write_text((root / name).read_text())
    with pytest.raises(CatalogError, match="b200.*cuda_visible_hbm_bytes"):
        load_catalog(tmp_path)


def test_custom_model_validation() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ModelSpec(id="x", layers=2, heads=6, kv_heads=4, head_dim=64, params=1e9)
