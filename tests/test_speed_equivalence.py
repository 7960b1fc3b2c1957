"""The fast load model gives the numbers of the slow path it replaced.

Issue 24 item 7: ``queueing.sojourn_quantile`` is a closed form (the CDF is
A_k − C·E_k·e^(−(t − s_k)/θ) between sorted services) instead of 48 bisection steps,
and ``queueing.erlang_c`` runs its recursion over the pools sorted by server count.
The slow paths are kept (``sojourn_quantile_bisect``) or restated here
(``_erlang_c_reference``: the recursion as it was, over the whole array), and the
sweep over catalog scenarios, run once each way, must agree row for row (rel 1e-9).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario  # noqa: E402
from planner.physics import queueing  # noqa: E402
from planner.physics.queueing import QueueWait, erlang_c, sojourn_quantile, sojourn_quantile_bisect  # noqa: E402
from planner.sizing import operating  # noqa: E402
from planner.views.sweep import sweep  # noqa: E402

REL = 1e-9


def _erlang_c_reference(servers: Any, offered: Any) -> np.ndarray:
    """erlang_c before the speed work: Erlang B's recursion over the whole array up to the
    largest pool, C recorded where c = k (Halfin–Whitt above the exact limit)."""
    c, a = np.broadcast_arrays(np.asarray(servers, dtype=float), np.asarray(offered, dtype=float))
    out = np.ones_like(a)
    small = c <= queueing.ERLANG_EXACT_MAX_SERVERS
    cmax = int(np.max(c[small])) if np.any(small) else 0
    b = np.ones_like(a)
    for k in range(1, cmax + 1):
        b = a * b / (k + a * b)
        at = c == k
        if np.any(at):
            rho = a[at] / k
            out[at] = np.where(rho < 1, b[at] / (1.0 - rho * (1.0 - b[at])), 1.0)
    large = ~small
    if np.any(large):
        cl, al = c[large], np.maximum(a[large], 1e-300)
        beta = (cl - al) / np.sqrt(al)
        phi = np.exp(-0.5 * beta * beta) / math.sqrt(2.0 * math.pi)
        cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in beta]))
        with np.errstate(divide="ignore"):
            out[large] = np.where(beta > 0, 1.0 / (1.0 + beta * cdf / phi), 1.0)
    return out


def test_erlang_c_same_bits_as_the_whole_array_recursion() -> None:
    rng = np.random.default_rng(7)
    c = np.concatenate([rng.integers(0, 80, 600).astype(float), rng.uniform(0.0, 30.0, 60), [1100.0, 1500.0]])
    c = c.reshape(-1, 2)
    a = c * rng.uniform(0.0, 1.2, c.shape)
    assert np.array_equal(erlang_c(c, a), _erlang_c_reference(c, a))
    # Textbook value: M/M/3 at a = 2 waits with probability 4/9.
    assert float(erlang_c(3.0, 2.0)) == pytest.approx(4.0 / 9.0, rel=1e-15)


def test_sojourn_closed_form_matches_bisection() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(200):
        n_cand, n_cls = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        s = rng.lognormal(-2.0, 1.5, (n_cand, n_cls))
        if trial % 5 == 0:
            s[:, : n_cls // 2] = s[:, :1]  # tied services
        w = rng.dirichlet(np.ones(n_cls))
        pw = rng.uniform(0.0, 1.0, n_cand)
        pw[::7] = 0.0  # never waits
        mean = pw * rng.lognormal(-2.0, 2.0, n_cand)
        mean[::11] = np.inf  # saturated
        wait = QueueWait(mean_s=mean, p_wait=pw, utilization=pw)
        for q in (0.5, 0.9, 0.99):
            fast = sojourn_quantile(q, wait, s, w)
            slow = sojourn_quantile_bisect(q, wait, s, w)
            assert np.array_equal(np.isinf(fast), np.isinf(slow))
            fin = np.isfinite(slow)
            np.testing.assert_allclose(fast[fin], slow[fin], rtol=REL, atol=0.0)
            checked += int(fin.sum())
    assert checked > 5_000


# Catalog models and workloads: dense and MoE, short and long prompts, loose and tight targets.
CASES: tuple[tuple[str, dict[str, Any], dict[str, Any], list[str]], ...] = (
    ("llama-3.1-8b", {"requests_per_s": 200, "prompt_tokens": 500, "output_tokens": 200},
     {"ttft_s": 0.5, "itl_s": 0.03}, ["h100-sxm", "l40s"]),
    ("llama-3.1-70b", {"requests_per_s": 40, "prompt_tokens": 1500, "output_tokens": 350},
     {"ttft_s": 0.8, "itl_s": 0.04}, ["h200-sxm"]),
    ("mixtral-8x7b", {"requests_per_s": 20, "prompt_tokens": 8000, "output_tokens": 300},
     {"ttft_s": 2.0, "itl_s": 0.05}, ["a100-sxm-80gb"]),
)


def _numbers(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_numbers(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _same(fast: Any, slow: Any) -> bool:
    if isinstance(fast, float) and isinstance(slow, float):
        if math.isnan(fast) or math.isnan(slow):
            return math.isnan(fast) and math.isnan(slow)
        if math.isinf(fast) or math.isinf(slow):
            return fast == slow
        return abs(fast - slow) <= REL * max(abs(fast), abs(slow))
    return bool(fast == slow)


def test_sweep_fast_equals_slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_runs = [sweep(Scenario(model=m, workload=wl, slo=slo), gpus=g, dtypes=["bf16", "fp8"])["rows"]
                 for m, wl, slo, g in CASES]
    monkeypatch.setattr(queueing, "sojourn_quantile", sojourn_quantile_bisect)
    monkeypatch.setattr(operating, "sojourn_quantile", sojourn_quantile_bisect)
    monkeypatch.setattr(queueing, "erlang_c", _erlang_c_reference)
    slow_runs = [sweep(Scenario(model=m, workload=wl, slo=slo), gpus=g, dtypes=["bf16", "fp8"])["rows"]
                 for m, wl, slo, g in CASES]
    compared = planned = 0
    for fast_rows, slow_rows in zip(fast_runs, slow_runs, strict=True):
        assert len(fast_rows) == len(slow_rows)
        for fr, sr in zip(fast_rows, slow_rows, strict=True):
            fn, sn = _numbers(fr), _numbers(sr)
            assert fn.keys() == sn.keys()
            bad = {k: (fn[k], sn[k]) for k in fn if not _same(fn[k], sn[k])}
            assert not bad, bad
            compared += 1
            planned += not fr["reason"].startswith("parallel")
    assert compared >= 300 and planned >= 150, (compared, planned)
