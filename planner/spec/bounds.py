"""The named caps on a Scenario's fields (planner.spec.scenario and
planner.spec.sections), each with the reason for its value.
"""

from __future__ import annotations

__all__ = [
    "MAX_ID_CHARS",
    "MAX_LINK_BYTES_PER_S",
    "MAX_LENGTH_SIGMA",
    "MAX_BALANCE_ITERS",
    "MAX_RECV_INTERVAL",
    "MAX_SEQUENCE_TOKENS",
    "MAX_TRACE_ROWS",
    "MAX_USD_PER_GPU_HOUR",
    "MAX_USD_PER_KWH",
    "MAX_WARM_POOL_REPLICAS",
    "MIN_LINK_BYTES_PER_S",
    "MIN_SCALE_INTERVAL_S",
]

# Bounds every scenario, from anywhere, is held to.
# Longest prompt or output a workload may name (the schema's bound since the
# start): ~60× the longest context in the catalog (DeepSeek-V3, 163,840 tokens),
# room for 10M-token-context models; past it the planner's arrays mean nothing.
MAX_SEQUENCE_TOKENS = 10_000_000
# Lognormal σ of prompt/output lengths: at σ = 3 the p99 length is already
# e^(2.33·3 − 4.5) ≈ 12× the mean and the median 1% of it; larger values overflow
# the quantile arithmetic (σ = 1e308 gave negative throughput).
MAX_LENGTH_SIGMA = 3.0
# Trace rows a scenario may carry: the planner reduces a trace to its moments,
# so a day of traffic at ~1 req/s is plenty (and ~1.5 MB of JSON).
MAX_TRACE_ROWS = 100_000
# Autoscaling: a control interval of 10 s is below any engine's start time (a
# day is then 8,640 intervals); a warm pool as large as the largest fleet bound.
MIN_SCALE_INTERVAL_S = 10.0
MAX_WARM_POOL_REPLICAS = 10_000
# A catalog id (gpu, model): the longest catalog id has 14 characters.
MAX_ID_CHARS = 200
# Prices a scenario may state: the dearest catalog GPU rents for about $10 per hour and
# electricity for well under $1/kWh, so 1,000× those; past them a fleet's dollars per hour
# overflow (1e308 $/GPU-hour made every sweep cost NaN).
MAX_USD_PER_GPU_HOUR = 10_000.0
MAX_USD_PER_KWH = 1_000.0
# SGLang's --scheduler-recv-interval: published recipes use 10 and 30; 1,000 decode steps
# (tens of seconds) is past any that serves interactive traffic.
MAX_RECV_INTERVAL = 1_000
# TensorRT-LLM's attention_dp_config.timeout_iters (with enable_balance): its default is 50 and
# published recipes use 60; 256 decode steps (seconds) is past any that serves interactive
# traffic, and the plan's wait distribution has one piece per step.
MAX_BALANCE_ITERS = 256
# A link or weight-loading bandwidth a scenario may state (fleet.link_bytes_per_s,
# fleet.load_bytes_per_s): 1 MB/s is below any network a KV cache or a model is moved
# over (a 1 Gb/s NIC is 125 MB/s), 1 PB/s ~500× NVLink 5's 1.8 TB/s.  Outside them a KV
# transfer or a cold start overflows to infinity (the hostile-input property drew a link
# of 1e-300 B/s).
MIN_LINK_BYTES_PER_S = 1.0e6
MAX_LINK_BYTES_PER_S = 1.0e15
