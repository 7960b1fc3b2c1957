"""Efficiency factors fitted on published measurements, per engine family.

Produced by ``python bench/fit_defaults.py --data ../shared/data/published_calibration.json``
(least squares on log error over every predictable row; see the README section
"How accurate is it?").  ``generic`` is fitted on all rows together and serves
engines whose family has too few rows of its own.
"""

from __future__ import annotations

__all__ = ["FITTED_EFFICIENCY", "FITTED_GPU_ROWS", "FITTED_ON", "FITTED_TERMS", "MIN_ROWS_COVERED"]

FITTED_ON = "shared/data/published_calibration.json"

# Predictable rows per catalog GPU in the fitted data (python -m planner validate
# on the same file); a GPU with fewer than MIN_ROWS_COVERED rows is outside what
# the fit has seen, and a plan on it says so.
FITTED_GPU_ROWS: dict[str, int] = {"h100-sxm": 70, "h200-sxm": 42, "a100-sxm-80gb": 11, "b200": 1}
MIN_ROWS_COVERED = 5

# Physics terms beyond the efficiencies (planner.physics.terms), each kept only
# where it lowered both cross-validated errors (README "How accurate is it?"):
# collective_hop_s: latency per ring step of a TP all-reduce (2(g−1) steps);
# sequence_overhead_s: host work per sequence per decode step (sampling, scheduling);
# gemm_half_width: per-GPU GEMM width (hidden / TP) at which the tensor-core rate halves;
# graph_layer_overhead_s: per layer of a decode step replayed as a CUDA graph (the kernels'
# own start-up and tail on the GPU, which a graph does not remove);
# collective_call_s: latency added once per TP all-reduce call (a TP1 step pays none);
# moe_layer_overhead_s / moe_token_overhead_s: a MoE layer's cost beyond its GEMMs, per layer
# and per routed token slot on a GPU (planner.physics.kernels.moe_overhead_s; a GPU's slots are
# T·k/EP with data-parallel attention, all T·k with tensor-parallel attention, where every rank's
# EP MoE kernels run over every token: kernels.moe_slot_ranks), fitted on the
# MoE rows with the dense efficiencies held: planner.validate.moefit.fit_terms on 240 seeded runs
# (seed 7) of inferencex_dsr1.json, on the step metrics and the TTFT's rise with the prompt (TTFT
# values are scored, not fitted on;
# python bench/fit_moe_terms.py), with mtp_acceptance: MTP's acceptance per chained position
# where a scenario states none (0: the DeepSeek-V3 report's 0.85), mtp_acceptance_trtllm: the same on
# serving.engine trtllm (planner.physics.speculative.ENGINE_MTP_TERMS; 0: mtp_acceptance), fitted
# apart because TensorRT-LLM's MTP runs accept more per position than SGLang's and ROCm's (one
# shared α left TensorRT-LLM's MTP TPOT 38-51% slow and SGLang's 19-40% fast), all_to_all_call_s:
# a dispatch or combine all-to-all's own latency per call (planner.physics.comm.all_to_all_s; 79 µs,
# the order of DeepEP's published low-latency kernels) and moe_prefill_slot_passes: the passes of a
# routed slot's hidden vector through HBM in a prefill's memory-bound MoE kernels (gather, quantize,
# scatter, combine; planner.physics.kernels.moe_prefill_slot_s, an effective count); these six are
# kept because leave-one-GPU-out and leave-one-engine-out errors fell with them (the slot passes:
# TPOT 17.5% -> 16.5%, TTFT 62.3% -> 48.5% leave one GPU out; published_moe.json, not fitted on,
# 31.7% -> 28.3%; counting every slot on each rank without DP attention, refitted: TPOT 16.5% ->
# 16.2%, TTFT 48.5% -> 44.8% leave one GPU out, leave one engine out 16.8/51.8/16.2/16.2% ->
# 16.3/43.8/16.1/15.2%, published_moe.json 28.3% -> 28.5%; the slot passes fitted on the TTFT's
# rise with the prompt as well as the step metrics (planner.validate.moefit.rise_pairs: the step
# metrics' loss is flat from 16 to 31 passes, the rise pins 15.6): leave one GPU out 16.2/44.8/
# 15.2/15.6% -> 15.3/46.7/14.7/14.5%, leave one engine out -> 16.3/47.9/15.4/15.7%,
# published_moe.json 28.5% -> 29.8%; each fit, the folds' and this one, on 240 runs instead of 120:
# leave one GPU out 15.3/45.4/14.6/14.7%, leave one engine out 15.6/47.7/14.9/15.2%,
# published_moe.json 29.2%).  moe_prefill_layer_overhead_s (a
# prefill pass's own per-layer MoE cost) is off:
# fitted, it lowered InferenceX's cross-validated errors but raised published_moe.json's median
# from 28.1% to 37.2%; moe_prefill_token_overhead_s (a constant time per prefill slot, the
# alternative to the slot passes) cross-validated worse than the passes (TPOT 16.9%, TTFT 50.1%
# leave one GPU out) and is off (README "How accurate is it on MoE?").  moe_step_overhead_share:
# the share of the dense-fitted step_overhead_s a MoE model's iteration pays where the scenario
# states none (planner.spec.context.moe_step_overhead_share); fitted with the six above it takes
# 0.059 and moe_layer_overhead_s rises from 25.9 to 61.5 us (the per-iteration fixed cost moves
# from the step into the MoE layers: 3.7 ms either way for DeepSeek's 58), and leave one GPU out
# goes 15.3/45.4/14.6/14.7% -> 14.8/45.1/14.4/14.1%, leave one engine out 15.6/47.7/14.9/15.2% ->
# 15.5/46.9/15.0/15.1%, published_moe.json 27.8% -> 26.8%; the folds' shares spread from 0.02 to
# 1.39 (it trades against moe_layer_overhead_s), so the split is loosely pinned and the sum is what
# the data fix.  disagg_handoff_s: a disaggregated request's fixed hand-off between its pools
# (fleet.kv_transfer_setup_s where a scenario states none: planner.spec.context.kv_transfer_setup_s),
# the one term fitted on TTFT values, on the disaggregated runs alone, after the step terms, to
# the least median |error| (planner.validate.moefit.fit_handoff), together with validate's
# prefill worker batching what arrived during its last pass (one prompt at a trickle, where it
# had always run full passes: that full pass had stood in for the hand-off); with both, every
# term refitted (0.21 s; the step share 0.73 and the MoE layer term 33 us, the same 3.7 ms of
# fixed cost per DeepSeek iteration split anew), leave one GPU out 14.8/45.1/14.4/14.1% ->
# 15.0/44.7/14.5/14.1%, leave one engine out 15.5/46.9/15.0/15.1% -> 15.9/45.1/14.9/15.2%,
# published_moe.json 26.8% -> 24.2%; the folds' hand-offs 0.17-0.195 s.  Refitted alone (0.165 s,
# python bench/fit_moe_terms.py --terms disagg_handoff_s) once validate read the decode pool's
# running-batch cap of InferenceX's Dynamo + TensorRT-LLM runs (planner.validate.recipes): the
# clients queued for a decode slot had been absorbed in it (in sample TTFT 29.1% -> 27.9%; leave one
# GPU out, every term refitted per fold, 14.8/35.5/14.6/14.1% -> 14.8/33.8/14.0/14.2%).  moe_prefill_host_layer_s:
# the hosts' floor on a colocated prompt's first token, per layer (planner.physics.prefill.host_floor_s:
# a MoE replica over several GPUs delivers a first token no sooner than L x this after the iteration
# that prefills it begins; the GPU's passes and the decode's pace are not held), fitted on the
# colocated TTFT rows with every other term held as shipped (planner.validate.moefit.fit_host_floor;
# python bench/fit_moe_terms.py --terms moe_prefill_host_layer_s): first 2.0 ms, 122 ms for
# DeepSeek's 61 layers, to the least median |error| over the rows pooled (InferenceX in sample TTFT
# 44.5% -> 34.9%, TPOT and throughput unmoved, published_moe.json (not fitted on) 24.2% -> 21.9%);
# in stop 44 the median over the GPU types of each one's own fit on the rows the floor moves
# (each GPU type is one kind of host; pooled, B200's runs, a third of the rows, set it): 1.9 ms,
# 116 ms (in sample TTFT 27.9% -> 27.3%); since stop 46 the value whose worst GPU type's median
# error is least (minimax over the GPU types: a new cluster's hosts are unknown, and the median of
# the types' own fits moved by a quarter when one type was left out): 1.925 ms, 117 ms (README "How
# accurate is it on MoE?", "The hosts' floor").  disagg_handoff_s refitted in stop 46 once a
# disaggregated prefill worker's pass carried its recipe's token budget (planner.validate.layout.
# prefill_pass_tokens): 0.17 s.
# disagg_handoff_iterations: the decode iterations a disaggregated request waits on its decode worker
# after its KV arrives (planner.physics.handoff.decode_admission_s: k x the decode pass at its batch),
# off (0): fitted with disagg_handoff_s on the disaggregated TTFT rows it came out 12 iterations and
# 15 ms (planner.validate.moefit.fit_handoff_iterations; in sample TTFT 27.3% -> 26.1%), but leaving one
# GPU out, every term refitted per fold, TTFT stayed 31.2% (the folds' (h, k) spread 0.03-0.135 s and
# 4-12; MI355X held out 28.4% -> 33.4%), so it is not kept (README "The decode worker's take-in").
# Fitted only when named: bench/moe_accuracy.py --terms moe,disagg_handoff_iterations.
# The step terms above are the values shipped before it: python bench/fit_moe_terms.py on this code (and on the code they shipped with)
# lands on another least-squares optimum (moe_layer_overhead_s 64 us, the step share 0.005, the
# late terms off while the step terms are fitted; 59 us and 0.125 with them at their shipped
# values), which scores worse on the medians in sample (TPOT 15.1-15.3% against 14.2%,
# published_moe.json 25.2% against 21.9%), so the shipped ones are kept.
FITTED_TERMS: dict[str, float] = {"collective_hop_s": 0, "sequence_overhead_s": 0, "gemm_half_width": 0, "graph_layer_overhead_s": 0, "collective_call_s": 2.636e-05, "moe_layer_overhead_s": 3.317e-05, "moe_token_overhead_s": 1.687e-08, "mtp_acceptance": 0.464, "moe_prefill_layer_overhead_s": 0, "moe_prefill_token_overhead_s": 0, "all_to_all_call_s": 8.109e-05, "mtp_acceptance_trtllm": 0.6846, "moe_prefill_slot_passes": 15.46, "moe_step_overhead_share": 0.7285, "disagg_handoff_s": 0.17, "moe_prefill_host_layer_s": 0.001925, "disagg_handoff_iterations": 0}

# bench/fit_defaults.py on published_calibration.json
FITTED_EFFICIENCY: dict[str, dict[str, float]] = {
    "generic": {"bandwidth": 0.9159, "compute": 0.592, "step_overhead_s": 0.002231, "layer_overhead_s": 7.568e-05, "collective_hop_s": 0, "sequence_overhead_s": 0, "gemm_half_width": 0, "graph_layer_overhead_s": 0, "collective_call_s": 2.636e-05},
    "trtllm": {"bandwidth": 0.9031, "compute": 0.5907, "step_overhead_s": 0.00226, "layer_overhead_s": 7.11e-05, "collective_hop_s": 0, "sequence_overhead_s": 0, "gemm_half_width": 0, "graph_layer_overhead_s": 0, "collective_call_s": 2.588e-05},
    "vllm": {"bandwidth": 0.9159, "compute": 0.592, "step_overhead_s": 0.002231, "layer_overhead_s": 7.568e-05, "collective_hop_s": 0, "sequence_overhead_s": 0, "gemm_half_width": 0, "graph_layer_overhead_s": 0, "collective_call_s": 2.636e-05},
}
