"""Shared fixtures: the seeds' nominal model shapes and catalog GPUs."""

from __future__ import annotations

import pytest

from planner import ModelSpec, get_gpu

# The seeds' reference shapes (001): nominal parameter counts, Llama-3 shaped.
SEED_8B = ModelSpec(id="seed-8b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, params=8e9)
SEED_70B = ModelSpec(id="seed-70b", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, params=70e9)
SEED_405B = ModelSpec(id="seed-405b", layers=126, hidden=16384, heads=128, kv_heads=8, head_dim=128, params=405e9)


@pytest.fixture()
def h100():
    return get_gpu("h100-sxm")
