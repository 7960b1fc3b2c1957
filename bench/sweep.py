"""Sweep speed: candidates/s for the vectorized sweep and for a Python loop over
``plan``, and their ratio.  Run: .venv/bin/python bench/sweep.py"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario, plan  # noqa: E402
from planner.views.sweep import sweep  # noqa: E402

BASE = Scenario(model="llama-3.1-70b", workload={"requests_per_s": 100, "prompt_tokens": 2000, "output_tokens": 250},
                slo={"ttft_s": 1.0, "itl_s": 0.05})


def main() -> None:
    sweep(BASE, gpus=["h100-sxm"], dtypes=["bf16"])  # warm caches and imports
    t0 = time.perf_counter()
    result = sweep(BASE)
    t_sweep = time.perf_counter() - t0
    rows = result["rows"]
    n = len(rows)
    batches = 1024
    sample = random.Random(0).sample([r for r in rows if not r["reason"].startswith("parallel")], 40)
    t0 = time.perf_counter()
    for row in sample:
        data = BASE.model_dump()
        data.update(gpu=row["gpu"], weights_dtype=row["weights_dtype"], parallel={"tp": row["tp"], "pp": row["pp"]})
        data["serving"]["mode"] = row["mode"]
        plan(Scenario.model_validate(data))
    t_loop = (time.perf_counter() - t0) / len(sample)
    print(f"default sweep: {n} candidates x {batches} batch sizes in {t_sweep:.3f} s "
          f"-> {n / t_sweep:,.0f} candidates/s ({n * batches / t_sweep:,.0f} candidate-batches/s)")
    print(f"python loop over plan(): {1 / t_loop:,.1f} candidates/s ({t_loop * 1e3:.1f} ms each)")
    print(f"ratio (sweep / loop): {(n / t_sweep) * t_loop:,.1f}x")


if __name__ == "__main__":
    main()
