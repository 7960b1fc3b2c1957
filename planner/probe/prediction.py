"""What the planner predicts for a probe's load level, as the run keeps it.

A typed record per level (it was a string-keyed dict): the prediction and the
MBU/MFU measured against the scenario's hardware.  Its JSON is the dict's:
``{"predicted": {batch_size, prompt_tokens, ttft_s, tpot_s, e2e_s,
output_tok_s, saturated}, "mbu": …, "mfu": …}``, so runs stored before load
into it unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["LevelPrediction", "PredictedLevel"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LevelPrediction(BaseModel):
    """What the planner predicts for one load level."""

    model_config = _FROZEN
    batch_size: float
    prompt_tokens: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tok_s: float
    saturated: bool = False


class PredictedLevel(BaseModel):
    """One level's prediction beside the measured MBU and MFU (None: not measurable)."""

    model_config = _FROZEN
    predicted: LevelPrediction
    mbu: float | None = None
    mfu: float | None = None
