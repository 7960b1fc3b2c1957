"""The sidebar's block for disaggregated pools with their own GPU and TP (``prefill.gpu``,
``prefill.parallel.tp``, ``decode.gpu``, ``decode.parallel.tp``): drawn only when the serving
mode is disaggregated; "same" keeps the scenario's own GPU or TP (the pool field unset).
A loaded scenario's pools set the widgets; the link carries them in its token."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner import POOL_ROLES, pool_data

__all__ = ["SAME", "pool_block"]

SAME = "same"  # the option that leaves a pool's field unset (the scenario's own)
_SEEN = "_pools_seen"  # the loaded pools the widgets were last set from


def _key(role: str, field: str) -> str:
    return f"pool_{role}_{field}"


def _sync(data: dict[str, Any]) -> None:
    """Set the widgets from the scenario's pools when they changed underneath (a load, a link)."""
    loaded = {role: data.get(role) for role in POOL_ROLES}
    if st.session_state.get(_SEEN) == loaded:
        return
    st.session_state[_SEEN] = loaded
    for role in POOL_ROLES:
        pool = loaded[role] or {}
        gpu = pool.get("gpu")
        st.session_state[_key(role, "gpu")] = gpu if isinstance(gpu, str) else SAME
        st.session_state[_key(role, "tp")] = (pool.get("parallel") or {}).get("tp") or SAME


def pool_block(data: dict[str, Any], *, gpus: list[str], tps: list[int]) -> dict[str, Any]:
    """The scenario dict with the pools the block sets (unchanged unless disaggregated)."""
    if (data.get("serving") or {}).get("mode") != "disaggregated":
        return data
    _sync(data)
    chosen: dict[str, tuple[Any, Any]] = {}
    with st.sidebar.expander("Pools (prefill : decode)", expanded=any(data.get(r) for r in POOL_ROLES)):
        st.caption("Each pool's own GPU and TP; “same” is the scenario's GPU or TP.")
        for role in POOL_ROLES:
            c1, c2 = st.columns(2)
            gopts: list[Any] = [SAME, *gpus]
            topts: list[Any] = [SAME, *tps]
            for key, opts in ((_key(role, "gpu"), gopts), (_key(role, "tp"), topts)):
                held = st.session_state.get(key)
                if held is not None and held not in opts:  # a loaded value no option shows: kept, offered
                    opts.append(held)
            with c1:
                g = st.selectbox(f"{role.capitalize()} GPU", gopts, key=_key(role, "gpu"))
            with c2:
                t = st.selectbox(f"{role.capitalize()} TP", topts, key=_key(role, "tp"))
            chosen[role] = (None if g == SAME else g, None if t == SAME else int(t))
    return pool_data(data, chosen)
