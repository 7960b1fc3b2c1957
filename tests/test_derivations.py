"""The working shown to users is checked: every derivation's substituted
expression, evaluated, gives the value it states.

The substituted values are rounded for display (``fmt_num``: four significant
digits), so each number in the expression is read as an interval of ± half a
unit in its fourth digit and the expression is evaluated in interval
arithmetic; the stated value must lie inside.  A dropped term (the prefill
working once left out the per-layer overhead: 65.9 ms of terms for 69.8 ms
stated) falls outside.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import ScenarioError, get_gpu, get_model, plan, scenario_from_dict
from tests.strategies import gpu_ids, kv_dtypes, model_ids

# fmt_num rounds to 4 significant digits: relative error ≤ 5e-4.
DISPLAY_REL = 5e-4


@dataclass(frozen=True)
class Iv:
    lo: float
    hi: float

    @staticmethod
    def of(x: float) -> Iv:
        d = abs(x) * DISPLAY_REL
        return Iv(x - d, x + d)

    def __add__(self, o: Iv) -> Iv:
        return Iv(self.lo + o.lo, self.hi + o.hi)

    def __sub__(self, o: Iv) -> Iv:
        return Iv(self.lo - o.hi, self.hi - o.lo)

    def __mul__(self, o: Iv) -> Iv:
        c = [self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi]
        return Iv(min(c), max(c))

    def __truediv__(self, o: Iv) -> Iv:
        if o.lo <= 0 <= o.hi:
            return Iv(-math.inf, math.inf)
        return self * Iv(1 / o.hi, 1 / o.lo)

    def __neg__(self) -> Iv:
        return Iv(-self.hi, -self.lo)


def _eval(node: ast.AST) -> Iv:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return Iv.of(float(node.value))
    if isinstance(node, ast.Name) and node.id in ("nan", "inf"):
        return Iv(float(node.id), float(node.id))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        ops = {ast.Add: Iv.__add__, ast.Sub: Iv.__sub__, ast.Mult: Iv.__mul__, ast.Div: Iv.__truediv__}
        return ops[type(node.op)](a, b)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a) for a in node.args]
        if node.func.id == "max":
            return Iv(max(a.lo for a in args), max(a.hi for a in args))
        if node.func.id == "min":
            return Iv(min(a.lo for a in args), min(a.hi for a in args))
        if node.func.id == "ceil":
            # ⌈x − 1e-9⌉ in the fleet sizing: the tolerance is far below the display rounding.
            return Iv(math.ceil(args[0].lo - 1e-9), math.ceil(args[0].hi - 1e-9))
    raise AssertionError(f"unexpected expression node {ast.dump(node)}")


def evaluate(substituted: str) -> Iv:
    """The interval a derivation's substituted text evaluates to."""
    text = substituted.replace("—", "nan").replace("×", "*").replace("−", "-").replace("⌈", "ceil(").replace("⌉", ")")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 131,072 -> 131072
    return _eval(ast.parse(text, mode="eval"))


def check(name: str, substituted: str, value: float) -> None:
    iv = evaluate(substituted)
    if value != value:
        assert iv.lo != iv.lo, f"{name}: states NaN but {substituted} is a number"
        return
    if math.isinf(value):
        # An infinite value (a queue that never drains) is reached through an infinite term, which
        # fmt_num writes as "—" like a missing one: the working must hold the infinity or that mark.
        assert iv.lo == value or "—" in substituted, f"{name}: states {value} but {substituted} = [{iv.lo}, {iv.hi}]"
        return
    slack = 1e-9 * max(abs(value), 1e-300)
    assert iv.lo - slack <= value <= iv.hi + slack, f"{name}: {substituted} = [{iv.lo}, {iv.hi}], states {value}"


def test_interval_evaluation_catches_a_dropped_term() -> None:
    # The prefill working before the fix: terms summing to 65.9 ms for 69.8 ms stated.
    check("ok", "max(3.317e+13 / (1 × 0.5093 × 9.89e+14), 0.005129) + 0 + 0 + 0.0001247 × 32", 0.06984)
    try:
        check("dropped", "max(3.317e+13 / (1 × 0.5093 × 9.89e+14), 0.005129) + 0 + 0", 0.06984)
    except AssertionError:
        return
    raise AssertionError("a 6% gap passed")


def test_interval_evaluation_reads_the_display_format() -> None:
    check("commas", "2250 × 131,072", 294_912_000.0)
    check("ceil", "max(2, ⌈10 / (0.7 × 8.922)⌉) × 1", 2.0)
    check("nan", "nan", math.nan)
    check("unstable queue", "— + 0.7952", math.inf)  # an infinite wait plus the prefill
    try:
        check("finite working", "1.5 + 0.7952", math.inf)
    except AssertionError:
        return
    raise AssertionError("a finite working passed for an infinite value")


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    gid, mid = draw(gpu_ids), draw(model_ids)
    gpu, model = get_gpu(gid), get_model(mid)
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if model.heads % t == 0 and t <= gpu.gpus_per_node]))
    # EP lays the experts over the TP GPUs (issue 25): it divides TP and the experts.
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if model.is_moe and model.experts % e == 0 and tp % e == 0]
                              or [1]))
    dp_attention = draw(st.booleans()) if model.is_moe else False
    prompt = draw(st.integers(min_value=16, max_value=40_000))
    prefix = draw(st.integers(min_value=0, max_value=prompt))
    return {
        "gpu": gid, "model": mid,
        "weights_dtype": draw(st.sampled_from(["bf16", "fp8", "int4"])), "kv_dtype": draw(kv_dtypes),
        "parallel": {"tp": tp, "pp": draw(st.sampled_from([1, 1, 2])), "ep": ep, "dp_attention": dp_attention},
        "workload": {"prompt_tokens": prompt, "output_tokens": draw(st.integers(min_value=1, max_value=2000)),
                     "requests_per_s": draw(st.floats(min_value=0.1, max_value=200)),
                     "prefix_tokens": prefix, "prefix_hit_rate": draw(st.floats(min_value=0, max_value=1))},
        "slo": {"ttft_s": draw(st.floats(min_value=0.2, max_value=30)),
                "itl_s": draw(st.floats(min_value=0.01, max_value=0.2))},
        "serving": {"mode": draw(st.sampled_from(["colocated", "disaggregated"])),
                    "memory_utilization": draw(st.sampled_from([None, 0.9])),
                    "chunk_tokens": draw(st.sampled_from([512, 2048, 8192]))},
        "speculative": {"draft_tokens": draw(st.sampled_from([0, 0, 3]))},
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_derivation_evaluates_to_its_value(data: dict) -> None:
    try:
        sc = scenario_from_dict(data)
    except ScenarioError:
        assume(False)
        return
    p = plan(sc)
    for name, dv in p.derivations.items():
        check(name, dv.substituted, dv.value)
