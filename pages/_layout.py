"""Layout helpers shared by pages: metric rows that stay readable at 1024 px."""

from __future__ import annotations

from typing import Any

import streamlit as st

__all__ = ["METRICS_PER_ROW", "metric_cells"]

# At 1024 px the main column is about 560 px wide: four metrics a row cut a label such as
# "HBM per GPU (CUDA-visible)" or a value such as "2,000 FLOP/B" with an ellipsis; two do not.
METRICS_PER_ROW = 2


def metric_cells(n: int, *, per_row: int = METRICS_PER_ROW) -> list[Any]:
    """``n`` containers for ``st.metric``, ``per_row`` to a row (rows drawn in order)."""
    cells: list[Any] = []
    while len(cells) < n:
        cells.extend(st.columns(per_row))
    return cells[:n]
