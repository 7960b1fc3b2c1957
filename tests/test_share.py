"""Stateless share tokens: random scenarios round-trip exactly; damage is caught."""

from __future__ import annotations

import base64
import zlib

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import Scenario, ScenarioError, get_gpu, get_model
from planner.spec.share import MAX_TOKEN_CHARS, scenario_from_token, share_token
from tests.strategies import gpu_ids, kv_dtypes, model_ids, weights_dtypes

finite = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
fractions = st.floats(min_value=0.01, max_value=1.0)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    gpu = draw(gpu_ids)
    model = draw(model_ids)
    prompt = draw(st.integers(1, 200_000))
    data = {
        "name": draw(st.text(max_size=40)),
        "gpu": get_gpu(gpu).model_dump(mode="json") if draw(st.booleans()) else gpu,
        "model": get_model(model).model_dump(mode="json") if draw(st.booleans()) else model,
        "weights_dtype": draw(weights_dtypes),
        "kv_dtype": draw(kv_dtypes),
        "parallel": {"tp": draw(st.sampled_from([1, 2, 4, 8])), "pp": draw(st.sampled_from([1, 2]))},
        "workload": {"prompt_tokens": prompt, "output_tokens": draw(st.integers(1, 20_000)),
                     "requests_per_s": draw(finite), "prefix_tokens": draw(st.integers(0, prompt)),
                     "prefix_hit_rate": draw(st.floats(0, 1))},
        "slo": {"ttft_s": draw(finite), "itl_s": draw(finite)},
        "serving": {"batch_size": draw(st.none() | st.integers(1, 4096)),
                    "memory_utilization": draw(st.none() | fractions)},
        "speculative": {"draft_tokens": draw(st.integers(0, 8)), "acceptance": draw(st.floats(0, 1))},
        "efficiency": {"bandwidth": draw(st.none() | fractions), "calibrated_from": draw(st.none() | st.text())},
        "cost": {"usd_per_gpu_hour": draw(st.none() | finite)},
    }
    try:
        return Scenario.model_validate(data)
    except ValueError:
        assume(False)
        raise


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(scenarios())
def test_round_trip_random_scenarios(scenario: Scenario) -> None:
    token = share_token(scenario)
    assert len(token) <= MAX_TOKEN_CHARS
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    back = scenario_from_token(token)
    assert back == scenario
    assert back.model_dump(mode="json") == scenario.model_dump(mode="json")
    assert share_token(back) == token  # canonical: the same scenario gives the same link


def test_default_scenario_token_is_short() -> None:
    assert len(share_token(Scenario())) < 1000


TOKEN = share_token(Scenario(name="shared", parallel={"tp": 2}))


def _flip(token: str, index: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ch = token[index]
    return token[:index] + alphabet[(alphabet.index(ch) + 1) % 64] + token[index + 1:]


@pytest.mark.parametrize(("token", "message"), [
    ("", "empty"),
    (TOKEN[:-10], "truncated|damaged|checksum"),
    (TOKEN[:8], "truncated|not a Ridgeline"),
    (_flip(TOKEN, 5), "checksum"),            # inside the checksum
    (_flip(TOKEN, len(TOKEN) // 2), "damaged|checksum|truncated"),  # inside the compressed JSON
    (TOKEN + "!!", "outside URL-safe base64"),
    ("hello world", "outside URL-safe base64|not a Ridgeline"),
    ("A" * (MAX_TOKEN_CHARS + 1), "longer than"),
    (base64.urlsafe_b64encode(b"XX" + b"\0" * 20).decode().rstrip("="), "not a Ridgeline"),
])
def test_corrupted_tokens_rejected(token: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=f"share link: .*({message})"):
        scenario_from_token(token)


def _forge(raw: bytes) -> str:
    import hashlib

    blob = b"R1" + hashlib.sha256(raw).digest()[:8] + zlib.compress(raw)
    return base64.urlsafe_b64encode(blob).decode().rstrip("=")


def test_valid_checksum_but_invalid_scenario_names_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"share link: parallel\.tp"):
        scenario_from_token(_forge(b'{"parallel": {"tp": 0}}'))
    with pytest.raises(ScenarioError, match="does not hold JSON"):
        scenario_from_token(_forge(b"not json"))


def test_zip_bomb_refused() -> None:
    with pytest.raises(ScenarioError, match="more than 1 MB"):
        scenario_from_token(_forge(b" " * 5_000_000))
