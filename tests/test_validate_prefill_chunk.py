"""A disaggregated run's prefill pass budget (planner.validate.layout.prefill_pass_tokens):
a prefill worker's pass carries its recipe's token budget on each attention-DP rank (the row's,
else InferenceX's recipe's max_num_tokens, else 16,384 on a Dynamo attention-DP worker)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from planner.spec.context import resolve
from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.disagg import prefill_capacity, prefill_service
from planner.validate.layout import DP_PREFILL_CHUNK_TOKENS
from planner.validate.predict import efficiency_for, operating_point, setup_row
from planner.validate.recipes import inferencex_recipes
from planner.validate.rows import MeasurementRow
from tests.validate_support import inferencex_row

# GB200 FP8 1k/1k: one prefill worker DEP8, one decode worker DEP8, 4,096 clients (a saturating
# load; not one of InferenceX's recipe points, so no recipe states its budget).
DEP = dict(engine="Dynamo + TensorRT-LLM", gpu="gb200", precision="fp8", n_gpus=16, tp=8, ep=8, dp_attention=True,
           isl=1024, osl=1024, concurrency=4096, speculative="none", multi_node=True, value=1.0,
           disaggregated=dict(prefill_gpus=8, decode_gpus=8, prefill_tp=8, prefill_ep=8, prefill_dp_attention=True,
                              prefill_workers=1, decode_tp=8, decode_ep=8, decode_dp_attention=True,
                              decode_workers=1, decode_max_batch=8192))
EFF = {k: dict(v) for k, v in FITTED_EFFICIENCY.items()}


def _setup(row: MeasurementRow):
    setup = setup_row(row, efficiency_for("trtllm", EFF))
    assert not isinstance(setup, str), setup
    assert setup.pools is not None
    return setup


def _with(**pool: object) -> MeasurementRow:
    return inferencex_row(**dict(DEP, disaggregated=dict(DEP["disaggregated"], **pool)))


# GB300 FP8 1k/1k with MTP: one prefill worker DEP4 and one decode worker DEP16 at 666 clients, whose
# recipe (ctx1_gen1_dep16_batch32_eplb0_mtp3_666.yaml) runs its context server at max_num_tokens 8192.
RECIPE_8K = dict(engine="Dynamo + TensorRT-LLM", gpu="gb300", precision="fp8", n_gpus=20, tp=16, ep=16,
                 dp_attention=True, isl=1024, osl=1024, concurrency=666, speculative="mtp", multi_node=True,
                 value=1.0, disaggregated=dict(prefill_gpus=4, decode_gpus=16, prefill_tp=4, prefill_ep=4,
                                               prefill_dp_attention=True, prefill_workers=1, decode_tp=16,
                                               decode_ep=16, decode_dp_attention=True, decode_workers=1))


def test_a_recipe_point_gets_its_recipes_budget() -> None:
    setup = _setup(inferencex_row(**RECIPE_8K))
    assert setup.pools is not None and setup.pools.prefill.serving.chunk_tokens == 8192
    assert any("max_num_tokens of InferenceX's recipe" in n and "ctx1_gen1_dep16_batch32_eplb0_mtp3_666" in n
               for n in setup.notes)
    # the shipped table reads every point's budget from its recipe
    budgets = {r.prefill_tokens_per_rank for r in inferencex_recipes().values()}
    assert None not in budgets and {8192, 16384} <= budgets and all(2048 <= b <= 16896 for b in budgets)


def test_an_attention_dp_prefill_worker_without_a_recipe_gets_16k_tokens_a_rank() -> None:
    setup = _setup(inferencex_row(**DEP))
    assert setup.pools is not None and setup.pools.prefill.serving.chunk_tokens == DP_PREFILL_CHUNK_TOKENS == 16384
    assert any("prefill_chunk_tokens not stated: 16384 tokens a pass on each attention-DP rank" in n
               for n in setup.notes)
    # Dynamo + SGLang's attention-DP prefill worker too (no recipe table for it) ...
    sglang = _setup(inferencex_row(**dict(DEP, engine="Dynamo + SGLang")))
    assert sglang.pools is not None and sglang.pools.prefill.serving.chunk_tokens == DP_PREFILL_CHUNK_TOKENS
    # ... but AMD's SGLang + MoRI workers pass 8,192 a rank (MORI_MAX_DISPATCH_TOKENS_PREFILL), the default
    mori = _setup(inferencex_row(**dict(DEP, engine="SGLang + MoRI (ROCm)", gpu="mi355x", multi_node=True)))
    assert mori.pools is not None and mori.pools.prefill.serving.chunk_tokens == 8192
    assert not any("prefill_chunk_tokens" in n for n in mori.notes)
    # the decode workers keep the engine's budget
    assert setup.scenario.serving.chunk_tokens == 8192


def test_a_stated_budget_wins_and_a_tp_prefill_worker_keeps_the_engines() -> None:
    stated = _setup(_with(prefill_chunk_tokens=4096))
    assert stated.pools is not None and stated.pools.prefill.serving.chunk_tokens == 4096
    assert not any("prefill_chunk_tokens" in n for n in stated.notes)
    over_recipe = dict(RECIPE_8K, disaggregated=dict(RECIPE_8K["disaggregated"], prefill_chunk_tokens=12000))
    mine = _setup(inferencex_row(**over_recipe))
    assert mine.pools is not None and mine.pools.prefill.serving.chunk_tokens == 12000
    tp = _setup(_with(prefill_dp_attention=False, prefill_ep=1))
    assert tp.pools is not None and tp.pools.prefill.serving.chunk_tokens == 8192
    assert not any("prefill_chunk_tokens" in n for n in tp.notes)


@pytest.mark.parametrize("bad", [0, 15, 1_000_001, "big"])
def test_a_bad_stated_budget_names_the_field(bad: object) -> None:
    with pytest.raises(ValidationError, match="prefill_chunk_tokens"):
        _with(prefill_chunk_tokens=bad)


def test_a_larger_budget_carries_more_prompts_a_pass_for_less_time_each() -> None:
    """⌊T/n⌋ prompts a rank: doubling T doubles the prompts a full pass carries, and the
    pass's fixed costs spread over them, so a prompt's share of a full pass is no longer."""
    small, large = _setup(_with(prefill_chunk_tokens=8192)), _setup(_with(prefill_chunk_tokens=16384))
    eff = efficiency_for("trtllm", EFF)
    n = small.prompt_tokens
    a = resolve(small.with_efficiency(eff, small.pools.prefill))
    b = resolve(large.with_efficiency(eff, large.pools.prefill))
    assert prefill_capacity(a, prompt=n) == 8 * math.floor(8192 / n)
    assert prefill_capacity(b, prompt=n) == 8 * math.floor(16384 / n)
    per_prompt_a, _ = prefill_service(a, prompt=n)
    per_prompt_b, _ = prefill_service(b, prompt=n)
    assert per_prompt_b <= per_prompt_a
    # under a load the prefill pool bounds, the larger budget serves more requests a second
    at_a, at_b = operating_point(small, eff), operating_point(large, eff)
    assert at_a.saturated  # 4,096 clients are more than 8,192-token passes keep up with
    assert at_b.output_tok_s_per_replica > at_a.output_tok_s_per_replica and at_b.ttft_s < at_a.ttft_s


def test_the_recipe_reader_takes_the_context_servers_budget_from_srt_slurm(tmp_path) -> None:
    """bench/inferencex_recipes.py reads a recipe's prefill max_num_tokens from a real git
    directory: the linked branch's copy first, else main's; absent or unreadable: None."""
    import subprocess

    from bench.inferencex_recipes import SRT_REF, prefill_tokens

    work = tmp_path / "srt"
    work.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})

    git("init", "-q", "-b", "main")
    recipe = "recipes/trtllm/gb300-fp8/1k1k/mtp/ctx1_gen1_dep16_batch32_eplb0_mtp3_666.yaml"
    (work / recipe).parent.mkdir(parents=True)
    (work / recipe).write_text("backend:\n  trtllm_config:\n    prefill:\n      max_num_tokens: 8192\n"
                               "    decode:\n      max_num_tokens: 512\n")
    (work / "recipes/other.yaml").write_text("backend: {}\n")
    git("add", ".")
    git("commit", "-q", "-m", "main")
    git("checkout", "-q", "-b", SRT_REF)
    (work / recipe).write_text("backend:\n  trtllm_config:\n    prefill:\n      max_num_tokens: 16384\n")
    git("commit", "-q", "-am", "branch")
    git("checkout", "-q", "main")  # HEAD is the default branch, as in a mirror
    gitdir = str(work / ".git")
    assert prefill_tokens(gitdir, recipe) == 16384  # the linked branch's copy
    assert prefill_tokens(gitdir, recipe, ref="no-such-branch") == 8192  # else main's
    assert prefill_tokens(gitdir, "recipes/other.yaml") is None
    assert prefill_tokens(gitdir, "recipes/missing.yaml") is None
    assert prefill_tokens(None, recipe) is None
