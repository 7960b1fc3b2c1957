"""The 2026 MoE models and GPUs in the catalog: shapes from config.json, parameter
counts against the published figures, names that resolve as published tables spell them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner import CatalogError, ModelSpec, get_gpu, get_model, load_catalog, param_counts
from planner.validate.names import resolve_gpu_name, resolve_model_name

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"

NEW_MODELS = ["deepseek-r1", "kimi-k2", "qwen3-235b-a22b", "qwen3-32b", "llama-4-scout", "llama-4-maverick",
              "gpt-oss-120b", "gpt-oss-20b", "mixtral-8x22b", "glm-4.5"]
NEW_GPUS = ["b300", "gb200", "gb300", "mi325x", "mi355x"]


@pytest.mark.parametrize("model_id", NEW_MODELS)
def test_new_model_params_within_1_5_percent_of_published(model_id: str) -> None:
    m = load_catalog().models[model_id]
    assert m.published_params is not None and m.source_url.startswith("https://huggingface.co/")
    assert m.source_note
    pc = param_counts(m)
    assert pc.total == pytest.approx(m.published_params, rel=0.015)
    if m.published_active_params:
        assert pc.active == pytest.approx(m.published_active_params, rel=0.03)


def test_deepseek_r1_is_deepseek_v3s_architecture() -> None:
    cat = load_catalog()
    r1, v3 = cat.models["deepseek-r1"], cat.models["deepseek-v3"]
    shape = {"id", "name", "aliases", "source_url", "source_note"}
    assert r1.model_dump(exclude=shape) == v3.model_dump(exclude=shape)
    assert param_counts(r1).moe_layers == 58  # 61 layers less first_k_dense_replace = 3


def test_maverick_interleaves_moe_every_second_layer() -> None:
    mav = get_model("llama-4-maverick")
    assert mav.moe_layer_count == 24
    # By hand: 24 MoE layers × (128 routed + 1 shared) × 3·5120·8192, 24 dense layers × 3·5120·16384,
    # 48 × attention (2·5120·5120 + 2·5120·1024) + norms, embeddings 2 × 202048·5120.
    expert = 3 * 5120 * 8192
    by_hand = (24 * (129 * expert + 5120 * 128) + 24 * 3 * 5120 * 16384
               + 48 * (2 * 5120 * 5120 + 2 * 5120 * 1024 + 2 * 5120) + 2 * 202048 * 5120 + 5120)
    assert param_counts(mav).total == pytest.approx(by_hand, rel=1e-12)
    # Scout: every layer MoE, 16 experts + 1 shared.
    assert get_model("llama-4-scout").moe_layer_count == 48


def test_gpt_oss_biases_and_sinks_are_counted() -> None:
    m = get_model("gpt-oss-120b")
    bare = m.model_copy(update={"qkv_bias": False, "o_bias": False, "attention_sinks": False, "expert_bias": False})
    extra = param_counts(m).total - param_counts(bare).total
    # Per layer: q/k/v biases (64 + 2·8)·64, o bias 2880, 64 sinks, 128 experts × (2·2880 + 2880) + 128 router biases.
    per_layer = (64 + 16) * 64 + 2880 + 64 + 128 * 3 * 2880 + 128
    assert extra == pytest.approx(36 * per_layer, rel=1e-12)
    assert m.attention_layer_counts == {"sliding": 18, "full": 18}


def test_llama4_chunked_on_three_of_four_layers() -> None:
    m = get_model("llama-4-scout")
    assert m.attention_layer_counts == {"chunked": 36, "full": 12}
    assert [m.layer_attention(i) for i in range(8)] == ["chunked"] * 3 + ["full"] + ["chunked"] * 3 + ["full"]
    assert m.attention_chunk_size == 8192


@pytest.mark.parametrize(("name", "expected"), [
    ("DeepSeek-R1", "deepseek-r1"), ("DeepSeek-R1-0528", "deepseek-r1"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("Llama-4-Maverick-17B-128E", "llama-4-maverick"), ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
                                                        "llama-4-maverick"),
    ("Llama-4-Scout-17B-16E", "llama-4-scout"), ("gpt-oss-120b", "gpt-oss-120b"), ("openai/gpt-oss-20b", "gpt-oss-20b"),
    ("Qwen3-235B-A22B", "qwen3-235b-a22b"), ("Mixtral-8x22B", "mixtral-8x22b"), ("Kimi-K2-Instruct", "kimi-k2"),
    ("GLM-4.5", "glm-4.5"), ("Qwen3-32B", "qwen3-32b"),
])
def test_published_names_resolve(name: str, expected: str) -> None:
    assert resolve_model_name(name) == (expected, None)


def test_every_model_and_gpu_in_the_moe_data_resolves() -> None:
    names: set[str] = set()
    gpus: set[str] = set()
    for f in ("published_moe.json", "inferencex_dsr1.json"):
        rows = json.loads((DATA / f).read_text())["measurements"]
        names |= {r["model"] for r in rows}
        gpus |= {r["gpu"] for r in rows}
    assert {"DeepSeek-R1", "DeepSeek-R1-0528"} <= names
    unresolved = {n: resolve_model_name(n)[1] for n in names if resolve_model_name(n)[0] is None}
    assert unresolved == {}
    # h100_unspecified is refused on purpose (the variant is not stated); every other GPU resolves.
    bad = {g: resolve_gpu_name(g)[1] for g in gpus if resolve_gpu_name(g)[0] is None and "unspecified" not in g}
    assert bad == {}


@pytest.mark.parametrize(("name", "expected"), [
    ("DeepSeek-R1-0528", "deepseek-r1"), ("deepseek-r1-0528", "deepseek-r1"), ("GPT-OSS-120B", "gpt-oss-120b"),
    (" Llama-4-Scout ", "llama-4-scout"), ("deepseek-v3", "deepseek-v3"),
])
def test_get_model_case_insensitive_with_aliases(name: str, expected: str) -> None:
    assert get_model(name).id == expected


def test_get_gpu_case_insensitive() -> None:
    assert get_gpu("H200-SXM").id == "h200-sxm"
    assert get_gpu("GB200").id == "gb200"
    with pytest.raises(CatalogError, match="unknown gpu 'h300'"):
        get_gpu("h300")
    with pytest.raises(CatalogError, match="unknown model 'deepseek-r2'"):
        get_model("deepseek-r2")


def test_scenario_accepts_a_published_spelling() -> None:
    from planner.spec.scenario import Scenario, resolve_model
    s = Scenario(gpu="H200-SXM", model="DeepSeek-R1-0528", weights_dtype="fp8", parallel={"tp": 8})
    assert resolve_model(s).id == "deepseek-r1"


def test_alias_colliding_with_another_id_is_refused(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "catalog"
    models = yaml.safe_load((root / "models.yaml").read_text())
    next(m for m in models if m["id"] == "deepseek-r1")["aliases"] = ["deepseek-v3"]
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    for name in ("gpus.yaml", "prices.yaml"):
        (tmp_path / name).write_text((root / name).read_text())
    with pytest.raises(CatalogError, match="deepseek-r1.*'deepseek-v3'"):
        load_catalog(tmp_path)


def test_old_inline_spec_loads_with_defaults() -> None:
    # A stored scenario's inline spec from before these fields: every new field defaults.
    m = ModelSpec(id="old", layers=2, heads=4, kv_heads=2, head_dim=64, params=1e9)
    assert (m.attention_pattern, m.sliding_window, m.attention_chunk_size, m.moe_layer_step) == (("full",), None, None,
                                                                                                 1)
    assert not m.has_windowed_layers and m.aliases == ()


@pytest.mark.parametrize(("update", "field"), [
    ({"attention_pattern": ("sliding", "full")}, "sliding_window"),
    ({"attention_pattern": ("chunked", "full")}, "attention_chunk_size"),
    ({"attention_pattern": ("local",)}, "attention_pattern"),
])
def test_windowed_pattern_needs_its_size(update: dict[str, object], field: str) -> None:
    base = dict(id="x", layers=4, heads=4, kv_heads=2, head_dim=64, params=1e9)
    with pytest.raises(ValueError, match=field):
        ModelSpec(**{**base, **update})


def test_moe_step_leaving_no_moe_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="no MoE layer"):
        ModelSpec(id="x", layers=2, heads=4, kv_heads=2, head_dim=64, hidden=256, intermediate=512, vocab=100,
                  experts=4, experts_per_token=1, moe_intermediate=128, moe_layer_step=3)


@pytest.mark.parametrize("gpu_id", NEW_GPUS)
def test_new_gpus_have_datasheet_figures_and_sources(gpu_id: str) -> None:
    g = load_catalog().gpus[gpu_id]
    assert g.source_url.startswith("https://") and g.source_note
    assert g.scaleout_bytes_per_s is not None and g.scaleup_bytes_per_s is not None
    # Dense rates only: FP8 is twice BF16 on every one of these chips (sparse would double both).
    assert g.flops_per_s.fp8 == pytest.approx(2 * g.flops_per_s.bf16, rel=0.01)
    assert g.hbm_bytes >= 186e9 and g.hbm_bytes_per_s >= 6e12


def test_nvl72_is_one_72_gpu_domain_over_4_gpu_trays() -> None:
    for gid in ("gb200", "gb300"):
        g = get_gpu(gid)
        assert (g.scaleup_domain_gpus, g.gpus_per_node, g.scaleup_nodes) == (72, 4, 18)
    assert get_gpu("h200-sxm").scaleup_nodes == 1


def test_every_gpu_states_its_scaleout_nic() -> None:
    cat = load_catalog()
    assert all(g.scaleout_bytes_per_s is not None for g in cat.gpus.values())
    # 400 Gb/s ConnectX-7 per GPU on HGX H100/H200; 800 Gb/s ConnectX-8 on B300/GB300.
    assert cat.gpus["h100-sxm"].scaleout_bytes_per_s == cat.gpus["h200-sxm"].scaleout_bytes_per_s == 400e9 / 8
    assert cat.gpus["b300"].scaleout_bytes_per_s == cat.gpus["gb300"].scaleout_bytes_per_s == 800e9 / 8


def test_fp4_only_where_the_chip_has_it() -> None:
    cat = load_catalog()
    assert cat.gpus["mi325x"].flops_per_s.fp4 is None
    assert cat.gpus["gb300"].flops_per_s.fp4 == pytest.approx(15e15)  # 1.08 EF dense per 72 GPUs


def test_unquoted_new_gpu_prices_are_marked_estimates() -> None:
    text = (Path(__file__).resolve().parents[1] / "catalog" / "gpus.yaml").read_text()
    cat = load_catalog()
    for gid in NEW_GPUS:
        block = text.split(f"- id: {gid}\n", 1)[1].split("\n- id: ", 1)[0]
        price_line = next(line for line in block.splitlines() if "usd_per_gpu_hour" in line)
        quoted = any(q.gpu == gid for q in cat.prices)
        assert quoted or "estimate" in price_line, gid


def test_domain_beyond_a_node_must_be_whole_nodes() -> None:
    from planner import GpuSpec
    base = get_gpu("gb200").model_dump()
    with pytest.raises(ValueError, match="whole number of nodes"):
        GpuSpec(**{**base, "scaleup_domain_gpus": 70})


# tests/data/hf/{gpt-oss-120b,llama-4-maverick,glm-4.5,kimi-k2}.json carry the architecture keys of
# each model's published config.json (the shapes, layer_types / no_rope_layers, biases, expert counts);
# a few keys that size nothing (tokenizer ids, the full vision tower) are left out.
HF = Path(__file__).parent / "data" / "hf"


@pytest.mark.parametrize("name", ["gpt-oss-120b", "llama-4-maverick", "glm-4.5", "kimi-k2"])
def test_hf_import_of_the_new_families_matches_the_catalog(name: str) -> None:
    from planner.spec.hf_import import load_hf_config
    spec = ModelSpec.from_hf_config(load_hf_config(HF / f"{name}.json"))
    cat = load_catalog().models[name]
    ignore = {"id", "name", "aliases", "source_url", "source_note", "published_params", "published_active_params"}
    assert spec.model_dump(exclude=ignore) == cat.model_dump(exclude=ignore)


def _cfg(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


@pytest.mark.parametrize(("name", "edit", "key"), [
    ("llama-4-maverick", lambda c: c.pop("text_config"), "text_config"),
    ("llama-4-maverick", lambda c: c["text_config"].update(moe_layers=[0, 2]), "moe_layers"),
    ("llama-4-maverick", lambda c: c["text_config"].update(no_rope_layers=[1, 0]), "no_rope_layers"),
    ("gpt-oss-120b", lambda c: c.update(layer_types=["local"] * 36), "layer_types"),
    ("gpt-oss-120b", lambda c: c.pop("sliding_window"), "sliding_window"),
    ("glm-4.5", lambda c: c.pop("n_routed_experts"), "n_routed_experts"),
])
def test_hf_import_of_new_families_names_the_bad_key(name: str, edit, key: str) -> None:
    cfg = _cfg(name)
    edit(cfg)
    with pytest.raises(CatalogError, match=key):
        ModelSpec.from_hf_config(cfg)


def test_llama4_default_nope_interval_without_the_list() -> None:
    cfg = _cfg("llama-4-maverick")
    cfg["text_config"].pop("no_rope_layers")  # HF's default: every 4th layer NoPE (no_rope_layer_interval 4)
    assert ModelSpec.from_hf_config(cfg).attention_pattern == ("chunked", "chunked", "chunked", "full")


def test_hf_import_reads_the_mtp_modules() -> None:
    from planner.spec.hf_import import load_hf_config
    assert ModelSpec.from_hf_config(load_hf_config(HF / "deepseek-v3.json")).mtp_layers == 1
    assert ModelSpec.from_hf_config(load_hf_config(HF / "kimi-k2.json")).mtp_layers == 0  # K2 ships none
