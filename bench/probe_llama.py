"""The probe against llama-server: wall-clock figures the tests leave out.

    .venv/bin/python bench/probe_llama.py

Starts llama.cpp's llama-server (tests/servers/build_llama_server.sh builds it) on
the random-weight tiny Llama, runs the tests' sweep (8 requests at c = 1, 2, 4, 8)
and prints per level the measured tok/s, TTFT and inter-token gap beside the
engine's own tokens per step; then calibrates on c = 1, 4, 8 and sets the
held-out c = 2 beside its prediction.  Timings depend on what else the machine
runs; the tests assert only counts and consistency (tests/test_probe_llama.py).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers.llama import BINARY, FIT_LEVELS, LlamaServer, scenario_for, sweep_settings  # noqa: E402
from servers.procs import raise_priority  # noqa: E402
from servers.tiny_gguf import TinyLlama  # noqa: E402

from planner.probe import calibrate, calibrated_scenario, run_probe_sync, with_prediction  # noqa: E402

HELD_OUT = 1  # level index of c = 2


def main() -> int:
    if not BINARY.is_file():
        print(f"llama-server not built at {BINARY}: run tests/servers/build_llama_server.sh", file=sys.stderr)
        return 2
    shape = TinyLlama()
    with tempfile.TemporaryDirectory() as tmp:
        model = shape.write(Path(tmp) / "tiny-llama.gguf")
        server = LlamaServer(model, Path(tmp) / "server.log")
        try:
            server.wait_healthy()
            raise_priority(niceness=-10)
            run = run_probe_sync(sweep_settings(server.url))
        finally:
            server.stop()
    print(f"{'c':>3} {'tok/s':>8} {'TTFT p50 ms':>12} {'ITL p50 ms':>11} {'tokens/step':>12}")
    for lv in run.levels:
        eng = lv.engine
        per_step = eng.generation_tokens / eng.engine_steps if eng.generation_tokens and eng.engine_steps else float("nan")
        print(f"{lv.concurrency:>3} {lv.output_tok_s:>8.1f} {lv.ttft_s.p50 * 1e3:>12.1f} {lv.itl_s.p50 * 1e3:>11.2f} "
              f"{per_step:>12.2f}")
    by_c = {lv.concurrency: lv.output_tok_s for lv in run.levels}
    print(f"tok/s at c=4 over c=1: {by_c[4] / by_c[1]:.2f}x")
    scenario = scenario_for(shape)
    cal = calibrate(run, scenario, levels=FIT_LEVELS)
    pred = with_prediction(run, calibrated_scenario(scenario, cal)).predicted[HELD_OUT]["predicted"]
    held = run.levels[HELD_OUT]
    print(f"fit on c=1,4,8: bandwidth {cal.bandwidth_efficiency:.3f} compute {cal.compute_efficiency:.3f} "
          f"overhead {cal.step_overhead_s * 1e3:.2f} ms, rms log error {cal.rms_log_error:.3f}")
    print(f"held-out c=2: ITL p50 {held.itl_s.p50 * 1e3:.2f} ms measured, {pred['tpot_s'] * 1e3:.2f} ms predicted "
          f"({pred['tpot_s'] / held.itl_s.p50 - 1:+.1%}); TTFT p50 {held.ttft_s.p50 * 1e3:.1f} ms measured, "
          f"{pred['ttft_s'] * 1e3:.1f} ms predicted ({pred['ttft_s'] / held.ttft_s.p50 - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
