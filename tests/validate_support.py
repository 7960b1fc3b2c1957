"""Helpers the engine-setting tests share: an InferenceX measurement row, and the scenario
``validate`` builds for it (with the shipped efficiencies) and the notes it writes."""

from __future__ import annotations

from planner import Scenario
from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.predict import efficiency_for, setup_row
from planner.validate.rows import MeasurementRow

INFERENCEX_RUN = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/1"


def inferencex_row(**kw: object) -> MeasurementRow:
    """A DeepSeek-R1 FP8 TTFT row on 8 B200 from an InferenceX run; ``kw`` overrides any field."""
    base: dict[str, object] = dict(
        id="r", model="DeepSeek-R1", precision="fp8", gpu="b200", n_gpus=8, tp=8, isl=1024, osl=1024,
        metric="ttft_ms", source=INFERENCEX_RUN)
    base.update(kw)
    return MeasurementRow.model_validate(base)


def row_scenario(row: MeasurementRow, family: str) -> tuple[Scenario, tuple[str, ...]]:
    """The scenario ``validate`` predicts ``row`` with, and its notes (the row must be predictable)."""
    setup = setup_row(row, efficiency_for(family, {k: dict(v) for k, v in FITTED_EFFICIENCY.items()}))
    assert not isinstance(setup, str), setup
    return setup.scenario, setup.notes
